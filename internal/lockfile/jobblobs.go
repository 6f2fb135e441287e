package lockfile

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"kici.dev/kici/internal/boundedre"
	"kici.dev/kici/internal/runs/status"

	"github.com/goccy/go-yaml/ast"

	"kici.dev/kici/internal/trigger/pattern"
)

// Cache is one entry of a job's `cache:` (KiCI LockJob.cache: {key, paths,
// restoreKeys}). Before the job's steps the agent restores the newest entry
// saved under Key, else under the newest key starting with one of
// RestoreKeys (in order); after the steps succeed, on an exact-key miss, it
// saves Paths under Key. Key and RestoreKeys may use the templates of
// ExpandCacheKey (file hashes, matrix values, OS and architecture).
type Cache struct {
	Key         string   `json:"key"`
	Paths       []string `json:"paths"`
	RestoreKeys []string `json:"restoreKeys,omitempty"`
}

// Artifact is one entry of a job's `artifacts:`: files matching Paths
// (globs relative to the workspace, "!" excludes) are packed at the end of
// the job and stored under Name in the run, for jobs that `download:` it
// and for the API. When is the set of job outcomes that upload it (success
// only when empty).
type Artifact struct {
	Name  string       `json:"name"`
	Paths []string     `json:"paths"`
	When  []status.Job `json:"when,omitempty"`
	// Attest asks for a provenance attestation naming the artifact
	// ("artifact:<name>") and the SHA-256 of its stored archive.
	Attest bool `json:"attest,omitempty"`
}

// Container runs a job's steps inside Image on an agent with a Docker
// Engine (kici; KiCI LockJob.container). Env is added to the container's
// environment after the job env allowlist; Options are extra `docker run`
// flags from a fixed safe set (see ContainerOptions).
type Container struct {
	Image   string            `json:"image,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Options []string          `json:"options,omitempty"`
	// Build builds the image from the repository instead (containerbuild.go);
	// exactly one of Image and Build is set.
	Build *ContainerBuild `json:"build,omitempty"`
}

// Service is a sidecar container started on the job's private network
// before its first step, reachable there by Name, and removed when the job
// ends. Health, when set, is run inside the service until it exits 0;
// the job's steps start only then.
type Service struct {
	Name    string            `json:"name"`
	Image   string            `json:"image"`
	Env     map[string]string `json:"env,omitempty"`
	Command []string          `json:"command,omitempty"`
	Health  *HealthCheck      `json:"health,omitempty"`
	// Ports are the TCP ports the service listens on (1–65535, distinct).
	// Where the job's services are sibling containers of a Kubernetes pod
	// (docs/kubernetes.md) they become container ports, and the agent waits
	// until each accepts connections on 127.0.0.1 before the first step,
	// since Health's command cannot run there.
	Ports []int `json:"ports,omitempty"`
}

// HealthCheck is a service's readiness probe: Cmd (argv) every Interval
// milliseconds, at most Retries times.
type HealthCheck struct {
	Cmd      []string `json:"cmd"`
	Interval int64    `json:"interval,omitempty"`
	Retries  int      `json:"retries,omitempty"`
}

// Limits of the job blob fields.
const (
	MaxCachesPerJob    = 8
	MaxArtifactsPerJob = 16
	MaxServicesPerJob  = 8
)

// blobNameRe is an artifact or service name: it becomes a blob key segment
// or a DNS name on the job network.
var blobNameRe = boundedre.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`, 1, 64)

// serviceNameRe is a service's host name on the job network.
var serviceNameRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ContainerOptions are the `docker run` flags a job's container or service
// may set; everything else (privileged, mounts, host namespaces, devices,
// capabilities) stays under the operator's control.
var ContainerOptions = []string{"--user", "--workdir", "--entrypoint", "--memory", "--cpus", "--shm-size", "--tmpfs"}

// cacheTemplateRe finds ${{ … }} in a cache key.
var cacheTemplateRe = regexp.MustCompile(`\$\{\{\s*(.*?)\s*\}\}`)

// checkCacheKey returns why a cache key template is invalid, or "".
func checkCacheKey(key string) string {
	if strings.TrimSpace(key) == "" {
		return "must not be empty"
	}
	rest := cacheTemplateRe.ReplaceAllStringFunc(key, func(m string) string {
		expr := cacheTemplateRe.FindStringSubmatch(m)[1]
		if _, err := parseCacheExpr(expr); err != nil {
			return "\x00" + err.Error() + "\x00"
		}
		return ""
	})
	if i := strings.IndexByte(rest, 0); i >= 0 {
		return rest[i+1 : i+1+strings.IndexByte(rest[i+1:], 0)]
	}
	if strings.Contains(rest, "${{") {
		return "has an unterminated ${{"
	}
	return ""
}

// cacheExpr is one parsed template expression.
type cacheExpr struct {
	fn   string   // "hashFiles", "matrix", "os", "arch"
	args []string // hashFiles globs, or the matrix key
}

var hashFilesRe = regexp.MustCompile(`^hashFiles\((.*)\)$`)

// parseCacheExpr parses the expressions a cache key may contain:
// hashFiles('glob', …), matrix.<key>, kici.os, kici.arch.
func parseCacheExpr(s string) (cacheExpr, error) {
	switch {
	case s == "kici.os":
		return cacheExpr{fn: "os"}, nil
	case s == "kici.arch":
		return cacheExpr{fn: "arch"}, nil
	case strings.HasPrefix(s, "matrix.") && validEnvName(strings.TrimPrefix(s, "matrix.")):
		return cacheExpr{fn: "matrix", args: []string{strings.TrimPrefix(s, "matrix.")}}, nil
	}
	m := hashFilesRe.FindStringSubmatch(s)
	if m == nil {
		return cacheExpr{}, fmt.Errorf("unknown expression %q (use hashFiles('<glob>', …), matrix.<key>, kici.os or kici.arch)", s)
	}
	var globs []string
	for _, a := range strings.Split(m[1], ",") {
		a = strings.TrimSpace(a)
		if len(a) < 3 || a[0] != '\'' || a[len(a)-1] != '\'' || strings.Contains(a[1:len(a)-1], "'") {
			return cacheExpr{}, fmt.Errorf("hashFiles takes quoted globs like hashFiles('go.sum'), got %q", m[1])
		}
		g := a[1 : len(a)-1]
		if _, err := pattern.CompileGlob(strings.TrimPrefix(g, "!")); err != nil {
			return cacheExpr{}, fmt.Errorf("hashFiles: invalid glob %q", g)
		}
		globs = append(globs, g)
	}
	return cacheExpr{fn: "hashFiles", args: globs}, nil
}

// jobBlobs decodes the job keys `cache`, `artifacts`, `download`,
// `container` and `services` into j.
func (f *yfile) jobBlobs(j *Job, key string, n ast.Node, what string) {
	switch key {
	case "cache":
		f.caches(j, n, what+" cache")
	case "artifacts":
		f.artifacts(j, n, what+" artifacts")
	case "download":
		j.Download, _ = f.strList(n, what+" download")
		for _, name := range j.Download {
			if !blobNameRe.MatchString(name) {
				f.errorf(n, "%s download: %q is not an artifact name (letters, digits, '.', '_', '-'; at most 64)", what, name)
			}
		}
	case "container":
		j.Container = f.container(n, what+" container")
	case "services":
		f.services(j, n, what+" services")
	}
}

func (f *yfile) caches(j *Job, n ast.Node, what string) {
	items, ok := f.sequence(n, what, false)
	if !ok {
		return
	}
	if len(items) > MaxCachesPerJob {
		f.errorf(n, "%s: at most %d caches per job, got %d", what, MaxCachesPerJob, len(items))
		return
	}
	for _, it := range items {
		entries, ok := f.mapping(it, what+" entry")
		if !ok {
			continue
		}
		f.strict(entries, what+" entry", "key", "paths", "restoreKeys")
		var c Cache
		for _, e := range entries {
			switch e.key {
			case "key":
				if s, ok := f.str(e.val, what+" key"); ok {
					if msg := checkCacheKey(s); msg != "" {
						f.errorf(e.val, "%s key %q %s", what, s, msg)
					}
					c.Key = s
				}
			case "paths":
				c.Paths, _ = f.strList(e.val, what+" paths")
				f.checkEach(e.val, what, func(p string) error { _, _, err := SplitCachePath(p); return err })
			case "restoreKeys":
				c.RestoreKeys, _ = f.strList(e.val, what+" restoreKeys")
				for _, rk := range c.RestoreKeys {
					if msg := checkCacheKey(rk); msg != "" {
						f.errorf(e.val, "%s restoreKeys %q %s", what, rk, msg)
					}
				}
			}
		}
		if c.Key == "" || len(c.Paths) == 0 {
			f.errorf(it, "%s entry needs a key and paths", what)
			continue
		}
		j.Cache = append(j.Cache, c)
	}
}

// checkEach reports check's error for every string item of the list n (or
// n itself, a single string), at that item's line.
func (f *yfile) checkEach(n ast.Node, what string, check func(string) error) {
	items := []ast.Node{n}
	if seq, ok := f.resolve(n).(*ast.SequenceNode); ok {
		items = seq.Values
	}
	for _, it := range items {
		if s, ok := f.scalar(f.resolve(it)); ok {
			if err := check(s); err != nil {
				f.errorf(it, "%s: %v", what, err)
			}
		}
	}
}

func (f *yfile) artifacts(j *Job, n ast.Node, what string) {
	items, ok := f.sequence(n, what, false)
	if !ok {
		return
	}
	if len(items) > MaxArtifactsPerJob {
		f.errorf(n, "%s: at most %d artifacts per job, got %d", what, MaxArtifactsPerJob, len(items))
		return
	}
	seen := map[string]bool{}
	for _, it := range items {
		entries, ok := f.mapping(it, what+" entry")
		if !ok {
			continue
		}
		f.strict(entries, what+" entry", "name", "paths", "when", "attest")
		var a Artifact
		for _, e := range entries {
			switch e.key {
			case "name":
				if s, ok := f.nonEmptyStr(e.val, what+" name"); ok {
					if !blobNameRe.MatchString(s) {
						f.errorf(e.val, "%s name %q: letters, digits, '.', '_', '-' only, at most 64", what, s)
					} else if seen[s] {
						f.errorf(e.val, "%s: artifact %q is declared twice", what, s)
					}
					seen[s] = true
					a.Name = s
				}
			case "paths":
				a.Paths = f.paths(e.val, what+" paths")
				f.checkEach(e.val, what, CheckArtifactPath)
			case "when":
				a.When = f.when(e.val, what+" when")
			case "attest":
				a.Attest, _ = f.boolean(e.val, what+" attest")
			}
		}
		if a.Name == "" || len(a.Paths) == 0 {
			f.errorf(it, "%s entry needs a name and paths", what)
			continue
		}
		j.Artifacts = append(j.Artifacts, a)
	}
}

func (f *yfile) container(n ast.Node, what string) *Container {
	if s, ok := f.scalar(n); ok { // `container: alpine:3` shorthand
		if strings.TrimSpace(s) == "" {
			f.errorf(n, "%s image must not be empty", what)
			return nil
		}
		return &Container{Image: s}
	}
	entries, ok := f.mapping(n, what)
	if !ok {
		return nil
	}
	f.strict(entries, what, "image", "env", "options", "build")
	c := &Container{}
	for _, e := range entries {
		switch e.key {
		case "build":
			c.Build = f.containerBuild(e.val, what+" build")
		case "image":
			c.Image, _ = f.nonEmptyStr(e.val, what+" image")
		case "env":
			c.Env = f.envMap(e.val, what+" env")
		case "options":
			c.Options = f.containerOptions(e.val, what+" options")
		}
	}
	if (c.Image == "") == (c.Build == nil) {
		f.errorf(n, "%s needs an image or a build (one of them)", what)
		return nil
	}
	return c
}

// containerOptions accepts "--flag=value" entries whose flag is in
// ContainerOptions.
func (f *yfile) containerOptions(n ast.Node, what string) []string {
	opts, _ := f.strList(n, what)
	for _, o := range opts {
		flag, _, hasValue := strings.Cut(o, "=")
		allowed := false
		for _, a := range ContainerOptions {
			allowed = allowed || a == flag
		}
		if !allowed || !hasValue {
			f.errorf(n, "%s: %q is not allowed (use --flag=value with one of %s)", what, o, strings.Join(ContainerOptions, ", "))
		}
	}
	return opts
}

func (f *yfile) services(j *Job, n ast.Node, what string) {
	entries, ok := f.mapping(n, what)
	if !ok {
		return
	}
	if len(entries) > MaxServicesPerJob {
		f.errorf(n, "%s: at most %d services per job, got %d", what, MaxServicesPerJob, len(entries))
		return
	}
	for _, e := range entries {
		sw := what + " " + e.key
		if !serviceNameRe.MatchString(e.key) {
			f.errorf(e.knode, "%s: service name %q must be a DNS label (a-z, 0-9, '-')", what, e.key)
			continue
		}
		s := Service{Name: e.key}
		if img, ok := f.scalar(e.val); ok {
			s.Image = img
		} else if fields, ok := f.mapping(e.val, sw); ok {
			f.strict(fields, sw, "image", "env", "command", "health", "ports")
			for _, fe := range fields {
				switch fe.key {
				case "image":
					s.Image, _ = f.nonEmptyStr(fe.val, sw+" image")
				case "env":
					s.Env = f.envMap(fe.val, sw+" env")
				case "command":
					s.Command, _ = f.strList(fe.val, sw+" command")
				case "health":
					s.Health = f.health(fe.val, sw+" health")
				case "ports":
					s.Ports = f.ports(fe.val, sw+" ports")
				}
			}
		}
		if strings.TrimSpace(s.Image) == "" {
			f.errorf(e.val, "%s needs an image", sw)
			continue
		}
		j.Services = append(j.Services, s)
	}
}

// ports decodes a service's list of distinct TCP ports (1–65535).
func (f *yfile) ports(n ast.Node, what string) []int {
	items, ok := f.sequence(n, what, true)
	if !ok {
		return nil
	}
	var out []int
	seen := map[int]bool{}
	for _, it := range items {
		p, ok := f.intRange(it, what+" entries", 1, 65535)
		if !ok {
			continue
		}
		if seen[p] {
			f.errorf(it, "%s: port %d is listed twice", what, p)
			continue
		}
		seen[p] = true
		out = append(out, p)
	}
	return out
}

func (f *yfile) health(n ast.Node, what string) *HealthCheck {
	entries, ok := f.mapping(n, what)
	if !ok {
		return nil
	}
	f.strict(entries, what, "cmd", "interval", "retries")
	h := &HealthCheck{}
	for _, e := range entries {
		switch e.key {
		case "cmd":
			h.Cmd, _ = f.strList(e.val, what+" cmd")
		case "interval":
			h.Interval, _ = f.duration(e.val, what+" interval")
		case "retries":
			h.Retries, _ = f.intRange(e.val, what+" retries", 1, 1000)
		}
	}
	if len(h.Cmd) == 0 {
		f.errorf(n, "%s needs a cmd", what)
		return nil
	}
	return h
}

// checkDownloads verifies that every `download:` name is an artifact of a
// job this job needs (directly), so a download can never wait on a job
// that might run later.
func checkDownloads(jobs []Job) (string, string) {
	byName := map[string]*Job{}
	for i := range jobs {
		byName[jobs[i].Name] = &jobs[i]
	}
	for _, j := range jobs {
		for _, d := range j.Download {
			found := false
			for _, n := range j.Needs {
				if up := byName[n.Name]; up != nil {
					for _, a := range up.Artifacts {
						found = found || a.Name == d
					}
				}
			}
			if !found {
				return j.Name, fmt.Sprintf("download %q: no job in needs declares that artifact", d)
			}
		}
	}
	return "", ""
}

// ExpandCacheKey replaces each ${{ … }} of a cache key template with
// eval(fn, args): fn is "hashFiles" (args: the globs), "matrix" (args: the
// key), "os" or "arch". The compiler has checked the template; an
// expression that no longer parses is an error.
func ExpandCacheKey(key string, eval func(fn string, args []string) (string, error)) (string, error) {
	var firstErr error
	out := cacheTemplateRe.ReplaceAllStringFunc(key, func(m string) string {
		e, err := parseCacheExpr(cacheTemplateRe.FindStringSubmatch(m)[1])
		if err == nil {
			var v string
			if v, err = eval(e.fn, e.args); err == nil {
				return v
			}
		}
		if firstErr == nil {
			firstErr = err
		}
		return ""
	})
	return out, firstErr
}

// UnmarshalJSON accepts KiCI's string form (`"container": "node:20"`, the
// image) as well as the object.
func (c *Container) UnmarshalJSON(b []byte) error {
	var image string
	if err := json.Unmarshal(b, &image); err == nil {
		*c = Container{Image: image}
		return nil
	}
	type plain Container
	return json.Unmarshal(b, (*plain)(c))
}
