package scalerconfig

import (
	"os"
	"strings"
)

// platform returns the scaler's effective platform and whether it was set
// explicitly (an explicit non-linux os or arm64 arch taints the scaler).
func (e *Entry) platform() (Platform, bool) {
	if e.Platform != nil {
		return *e.Platform, true
	}
	if e.Type == TypeBareMetal {
		return hostPlatform(), false
	}
	return Platform{OS: "linux", Arch: hostPlatform().Arch}, false
}

// platformLabels are the kici:os:/kici:arch: labels an agent on p carries
// (the same words protocol.AutoLabels produces, plus KiCI's aliases).
func platformLabels(p Platform) []string {
	var l []string
	switch p.OS {
	case "macos":
		l = append(l, "kici:os:macos", "kici:os:darwin")
	default:
		l = append(l, "kici:os:"+p.OS)
	}
	switch p.Arch {
	case "x64":
		l = append(l, "kici:arch:x64", "kici:arch:amd64")
	case "arm64":
		l = append(l, "kici:arch:arm64", "kici:arch:aarch64")
	default:
		l = append(l, "kici:arch:"+p.Arch)
	}
	return l
}

// gate is the per-label-set taint gate (KiCI step 3): mandatoryLabels
// plus the platform taints of an explicit non-linux os (kici:os:<os>) or
// arm64 arch (kici:arch:arm64). A job is served only when its runsOn holds
// every gate label.
func (e *Entry) gate(ls *LabelSet) []string {
	g := append([]string(nil), e.MandatoryLabels...)
	if p, explicit := e.platform(); explicit {
		if p.OS != "linux" {
			g = append(g, "kici:os:"+p.OS)
		}
		if p.Arch == "arm64" {
			g = append(g, "kici:arch:arm64")
		}
	}
	return g
}

// enriched is every label an agent of ls is selectable by: the set's
// labels, the platform labels, kici:scaler:<name>, kici:agent:<type>,
// kici:role:<role> per configured role, and kici:host:<hostname> for
// bare-metal agents (they run on this host).
func (e *Entry) enriched(ls *LabelSet) []string {
	p, _ := e.platform()
	l := append([]string(nil), ls.Labels...)
	l = append(l, platformLabels(p)...)
	l = append(l, "kici:scaler:"+e.Name, "kici:agent:"+string(e.Type))
	if e.Roles != nil {
		for _, r := range *e.Roles {
			if r != "all" {
				l = append(l, "kici:role:"+r)
			}
		}
	}
	if e.Type == TypeBareMetal {
		if h, _ := os.Hostname(); h != "" {
			l = append(l, "kici:host:"+h)
		}
	}
	return l
}

// gateSatisfied reports whether runsOn names every gate label (aliases of
// platform labels count: kici:arch:aarch64 satisfies kici:arch:arm64).
func gateSatisfied(gate, runsOn []string) bool {
	for _, g := range gate {
		if contains(runsOn, g) {
			continue
		}
		ok := false
		switch g {
		case "kici:arch:arm64":
			ok = contains(runsOn, "kici:arch:aarch64")
		case "kici:os:macos":
			ok = contains(runsOn, "kici:os:darwin")
		}
		if !ok {
			return false
		}
	}
	return true
}

// Match implements KiCI findBackendForLabels over entries, in order: a
// label set matches when its gate is satisfied by runsOn, runsOn ⊆ its
// enriched labels and none of its enriched labels is excluded. The match
// with the fewest labels wins (the first on a tie); with an empty runsOn,
// the first label set with an empty gate wins. Labels are compared
// lower-cased. It returns the index of the matching entry and its label
// set; ok is false when none matches.
func Match(entries []*Entry, runsOn, exclude []string) (index int, ls *LabelSet, ok bool) {
	runsOn = lower(runsOn)
	exclude = lower(exclude)
	for i, e := range entries {
		for _, set := range e.LabelSets {
			gate := e.gate(set)
			en := e.enriched(set)
			if len(runsOn) == 0 {
				if len(gate) == 0 && !intersects(en, exclude) {
					return i, set, true
				}
				continue
			}
			if !gateSatisfied(gate, runsOn) || intersects(en, exclude) {
				continue
			}
			subset := true
			for _, l := range runsOn {
				if !contains(en, l) {
					subset = false
					break
				}
			}
			if subset && (!ok || len(set.Labels) < len(ls.Labels)) {
				index, ls, ok = i, set, true
			}
		}
	}
	return index, ls, ok
}

func lower(s []string) []string {
	out := make([]string, 0, len(s))
	for _, l := range s {
		out = append(out, strings.ToLower(strings.TrimSpace(l)))
	}
	return out
}

func intersects(a, b []string) bool {
	for _, x := range b {
		if contains(a, x) {
			return true
		}
	}
	return false
}

// Serves reports whether some label set of c could spawn an agent for a
// job with runsOn and exclude labels: the same Match the scaler manager
// uses, over every scaler of c (a file has no retiring scalers). `kici
// preview` calls it offline to flag jobs that would only ever be unroutable.
func (c *Config) Serves(runsOn, exclude []string) bool {
	_, _, ok := Match(c.Scalers, runsOn, exclude)
	return ok
}
