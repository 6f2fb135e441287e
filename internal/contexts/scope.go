package contexts

import (
	"strings"

	"kici.dev/kici/internal/store"
)

// AgentFacts identify the agent a job is dispatched to, for matching
// binding host patterns and templating scope patterns.
type AgentFacts struct {
	ID       string
	Hostname string
	// Labels are the agent's labels ("kici:os:linux", "team:infra", …).
	Labels []string
}

// SecretsAllowed reports whether a run may receive the secrets of context
// c: always for a trusted run or one with no resolved tier, and for a run
// of tier unknown (a fork pull request) only when c sets AllowUntrusted.
// kici addition: KiCI handed untrusted runs every bound secret except
// registry credentials.
func SecretsAllowed(c *store.Context, f RunFacts) bool {
	return f.TrustTier != store.TrustUnknown || (c != nil && c.AllowUntrusted)
}

// ScopeGranted reports whether one of a context's bindings grants the
// secret scope (a "/"-separated path such as "release" or "team/prod") to
// agent a. A binding grants it when
//
//   - its ScopePattern, after substituting ${agentId}, ${host} and
//     ${label:NAME} (the value of the agent's first label "NAME:value" or
//     "NAME=value"; when the agent has no such label the binding does not
//     apply), glob-matches scope — "release/*" matches "release/x" but not
//     "release", a pattern without glob syntax matches only itself; and
//   - its HostPattern matches the agent: "", "*" and "**" match any agent;
//     "/source/flags" is a Go regular expression (flag i only; an invalid
//     one never matches) searched in the agent id, hostname and each label;
//     anything else is a glob (or exact name) matched against the id, the
//     hostname or any label.
//
// Substituted values are escaped, so an agent's name cannot inject glob
// syntax into a scope pattern.
func ScopeGranted(bindings []*store.ContextBinding, scope string, a AgentFacts) bool {
	for _, b := range bindings {
		if b == nil {
			continue
		}
		p, ok := expandScope(b.ScopePattern, a)
		if !ok {
			continue
		}
		if !matchGlob(p, scope) {
			continue
		}
		if HostMatches(b.HostPattern, a) {
			return true
		}
	}
	return false
}

// HostMatches reports whether a binding's host pattern matches agent a (see
// ScopeGranted).
func HostMatches(hostPattern string, a AgentFacts) bool {
	switch hostPattern {
	case "", "*", "**":
		return true
	}
	candidates := append([]string{a.ID, a.Hostname}, a.Labels...)
	if re, isRegex, err := HostRegex(hostPattern); isRegex {
		if err != nil {
			return false
		}
		for _, c := range candidates {
			if c != "" && re.MatchString(c) {
				return true
			}
		}
		return false
	}
	g, err := compileGlob(hostPattern)
	if err != nil {
		return false
	}
	for _, c := range candidates {
		if c != "" && g.Match(c) {
			return true
		}
	}
	return false
}

// expandScope substitutes the agent placeholders of a scope pattern; ok is
// false when a ${label:NAME} names a label the agent does not have, or a
// placeholder's value is empty.
func expandScope(p string, a AgentFacts) (string, bool) {
	var b strings.Builder
	for {
		i := strings.Index(p, "${")
		if i < 0 {
			b.WriteString(p)
			return b.String(), true
		}
		j := strings.IndexByte(p[i:], '}')
		if j < 0 {
			b.WriteString(p)
			return b.String(), true
		}
		b.WriteString(p[:i])
		name := p[i+2 : i+j]
		var val string
		switch {
		case name == "agentId":
			val = a.ID
		case name == "host":
			val = a.Hostname
		case strings.HasPrefix(name, "label:"):
			val = labelValue(a.Labels, strings.TrimPrefix(name, "label:"))
		default:
			// Not a placeholder: keep it as written.
			b.WriteString(p[i : i+j+1])
			p = p[i+j+1:]
			continue
		}
		if val == "" {
			return "", false
		}
		b.WriteString(escapeGlob(val))
		p = p[i+j+1:]
	}
}

// labelValue returns the value of the first label "name:value" or
// "name=value", or "".
func labelValue(labels []string, name string) string {
	if name == "" {
		return ""
	}
	for _, l := range labels {
		if rest, ok := strings.CutPrefix(l, name); ok && len(rest) > 1 && (rest[0] == ':' || rest[0] == '=') {
			return rest[1:]
		}
	}
	return ""
}

// escapeGlob backslash-escapes glob syntax so s matches only itself.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]{}()!|+@\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
