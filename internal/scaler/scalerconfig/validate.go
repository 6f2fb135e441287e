package scalerconfig

import (
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"strings"
)

// Validation of a decoded scalers.yaml: top-level fields, each scaler
// entry, labels, resources, and overlapping label sets (KiCI's reload
// stages 1 and 2).

// validate checks c as a whole and fills file-wide defaults.
func (c *Config) validate() error {
	top := func(field, format string, a ...any) error {
		return &ConfigError{File: c.mainFile, Field: field, Msg: fmt.Sprintf(format, a...)}
	}
	if c.Version != 1 {
		return top("version", "must be 1 (got %d)", c.Version)
	}
	if c.GlobalMaxAgents == 0 {
		c.GlobalMaxAgents = DefaultGlobalMaxAgents
	}
	if c.GlobalMaxAgents < 0 {
		return top("globalMaxAgents", "must be a positive integer")
	}
	if c.Defaults != nil && c.Defaults.Resources != nil {
		if err := checkResources(c.Defaults.Resources); err != nil {
			return top("defaults.resources", "%v", err)
		}
	}
	if len(c.Scalers) == 0 {
		return top("scalers", "at least one scaler is required")
	}
	seen := map[string]bool{}
	for i, e := range c.Scalers {
		if e == nil {
			return top(fmt.Sprintf("scalers[%d]", i), "empty entry")
		}
		if err := e.validate(i); err != nil {
			return err
		}
		if seen[e.Name] {
			return &ConfigError{File: e.file, Field: fmt.Sprintf("scalers[%d].name", i), Msg: fmt.Sprintf("duplicate scaler name %q", e.Name)}
		}
		seen[e.Name] = true
	}
	if err := c.validateFirecrackerNetwork(); err != nil {
		return err
	}
	return c.checkOverlaps()
}

func (e *Entry) validate(i int) error {
	p := fmt.Sprintf("scalers[%d]", i)
	bad := func(field, format string, a ...any) error {
		return &ConfigError{File: e.file, Field: p + field, Msg: fmt.Sprintf(format, a...)}
	}
	if !nameRe.MatchString(e.Name) {
		return bad(".name", "invalid scaler name %q: want 1–63 characters of a-z, 0-9 and -, starting and ending with a letter or digit", e.Name)
	}
	switch e.Type {
	case TypeBareMetal, TypeContainer, TypeFirecracker, TypeQEMU, TypeKubernetes:
	case "":
		return bad(".type", "required (bare-metal, container, firecracker, qemu or kubernetes)")
	default:
		return bad(".type", "unsupported type %q (this build has bare-metal, container, firecracker, qemu and kubernetes)", e.Type)
	}
	if e.MaxAgents <= 0 {
		return bad(".maxAgents", "required: a positive integer")
	}
	if e.MaxConcurrentSpawns == 0 {
		e.MaxConcurrentSpawns = DefaultMaxConcurrentSpawns
	}
	if e.MaxConcurrentSpawns < 0 {
		return bad(".maxConcurrentSpawns", "must be a positive integer")
	}
	if e.Platform != nil {
		switch e.Platform.OS {
		case "linux", "macos", "windows":
		default:
			return bad(".platform.os", "must be linux, macos or windows (got %q)", e.Platform.OS)
		}
		switch e.Platform.Arch {
		case "x64", "arm64":
		default:
			return bad(".platform.arch", "must be x64 or arm64 (got %q)", e.Platform.Arch)
		}
	}
	if e.Roles != nil {
		for j, r := range *e.Roles {
			switch r {
			case "all", "builder", "init-runner":
			default:
				return bad(fmt.Sprintf(".roles[%d]", j), "must be all, builder or init-runner (got %q)", r)
			}
		}
	}
	for j, l := range e.MandatoryLabels {
		l = strings.ToLower(strings.TrimSpace(l))
		if err := checkLabel(l); err != nil {
			return bad(fmt.Sprintf(".mandatoryLabels[%d]", j), "%v", err)
		}
		e.MandatoryLabels[j] = l
	}
	if e.OrchestratorURL != "" {
		u, err := url.Parse(e.OrchestratorURL)
		if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
			return bad(".orchestratorUrl", "must be a ws:// or wss:// URL with a host (got %q)", e.OrchestratorURL)
		}
	}
	if wp := e.WarmPool; wp != nil {
		if wp.Size < 0 || wp.Size > e.MaxAgents {
			return bad(".warmPool.size", "must be between 0 and maxAgents (%d)", e.MaxAgents)
		}
		if wp.IdleTimeoutSeconds == 0 {
			wp.IdleTimeoutSeconds = 300
		}
		if wp.IdleTimeoutSeconds < 0 {
			return bad(".warmPool.idleTimeoutSeconds", "must be a positive number of seconds")
		}
	}
	if e.EnforceCgroups && e.Type != TypeBareMetal {
		return bad(".enforceCgroups", "applies to bare-metal scalers only")
	}
	if e.SocketPath != "" {
		if e.Type != TypeContainer {
			return bad(".socketPath", "applies to container scalers only")
		}
		if !filepath.IsAbs(e.SocketPath) {
			return bad(".socketPath", "must be an absolute path")
		}
	}
	if len(e.LabelSets) == 0 {
		return bad(".labelSets", "at least one label set is required")
	}
	if err := e.validateKubernetes(p); err != nil {
		return err
	}
	if e.Type == TypeQEMU {
		if err := e.validateQEMU(p); err != nil {
			return err
		}
	} else {
		if err := e.refuseQEMUFields(p); err != nil {
			return err
		}
		if err := e.validateFirecracker(p); err != nil {
			return err
		}
	}
	for j, ls := range e.LabelSets {
		lp := fmt.Sprintf(".labelSets[%d]", j)
		if ls == nil {
			return bad(lp, "empty label set")
		}
		if len(ls.Labels) == 0 {
			return bad(lp+".labels", "at least one label is required")
		}
		for k, l := range ls.Labels {
			l = strings.ToLower(strings.TrimSpace(l))
			if err := checkLabel(l); err != nil {
				return bad(fmt.Sprintf("%s.labels[%d]", lp, k), "%v", err)
			}
			ls.Labels[k] = l
		}
		for _, g := range e.MandatoryLabels {
			if !contains(ls.Labels, g) {
				return bad(lp+".labels", "must contain mandatory label %q", g)
			}
		}
		switch e.Type {
		case TypeContainer:
			if ls.Image == "" {
				return bad(lp+".image", "required for container scalers")
			}
			if ls.BinaryPath != "" {
				return bad(lp+".binaryPath", "applies to bare-metal scalers only")
			}
			switch ls.ImagePullPolicy {
			case "":
				ls.ImagePullPolicy = "IfNotPresent"
			case "Always", "IfNotPresent", "Never":
			default:
				return bad(lp+".imagePullPolicy", "must be Always, IfNotPresent or Never (got %q)", ls.ImagePullPolicy)
			}
		case TypeBareMetal:
			if ls.Image != "" {
				return bad(lp+".image", "container mode of bare-metal scalers is not available in this build; use a container scaler")
			}
			if ls.ImagePullPolicy != "" {
				return bad(lp+".imagePullPolicy", "applies to container scalers only")
			}
			if ls.BinaryPath != "" && !filepath.IsAbs(ls.BinaryPath) {
				return bad(lp+".binaryPath", "must be an absolute path")
			}
		}
		if ls.Resources != nil {
			if err := checkResources(ls.Resources); err != nil {
				return bad(lp+".resources", "%v", err)
			}
		}
		for k := range ls.Env {
			if !envRe.MatchString(k) {
				return bad(lp+".env", "invalid variable name %q", k)
			}
			if strings.HasPrefix(strings.ToUpper(k), "KICI_") {
				return bad(lp+".env", "%s: KICI_* variables are set by the scaler and cannot be overridden", k)
			}
		}
	}
	return nil
}

func checkLabel(l string) error {
	if strings.HasPrefix(l, "kici:") {
		return fmt.Errorf("label %q uses the reserved kici: prefix", l)
	}
	if !labelRe.MatchString(l) {
		return fmt.Errorf("invalid label %q: want 1–128 characters of a-z, 0-9 and . _ / : + -, starting with a letter or digit", l)
	}
	return nil
}

func checkResources(r *Resources) error {
	if r.CPUs != nil && (*r.CPUs <= 0 || *r.CPUs > 256 || math.IsNaN(*r.CPUs)) {
		return fmt.Errorf("cpus must be > 0 and ≤ 256")
	}
	if r.Memory != nil {
		if _, err := ParseMemory(*r.Memory); err != nil {
			return err
		}
	}
	return nil
}

// checkOverlaps refuses two label sets (of different scalers, or of one)
// with identical canonical labels and gates: routing between them would be
// arbitrary (KiCI reload stage 2, cross-scaler overlap detection).
func (c *Config) checkOverlaps() error {
	seen := map[string]string{}
	for i, e := range c.Scalers {
		for j, ls := range e.LabelSets {
			key := strings.Join(sortedCopy(ls.Labels), ",") + "|" + strings.Join(sortedCopy(e.gate(ls)), ",")
			where := fmt.Sprintf("scalers[%d].labelSets[%d]", i, j)
			if prev, ok := seen[key]; ok {
				return &ConfigError{File: e.file, Field: where + ".labels", Msg: fmt.Sprintf("same labels and gate as %s: routing between them would be ambiguous", prev)}
			}
			seen[key] = where
		}
	}
	return nil
}
