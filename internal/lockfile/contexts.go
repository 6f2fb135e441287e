package lockfile

import (
	"fmt"
	"regexp"

	"github.com/goccy/go-yaml/ast"
)

// MaxContextNameLen bounds a context name a job may declare.
const MaxContextNameLen = 128

// contextNameRe is a declared context name: a context name
// ([A-Za-z0-9._-]) in which `*` and `?` may stand for the part that
// varies, so that a declared name like "deploy-*" is matched against the
// org's contexts at dispatch.
var contextNameRe = regexp.MustCompile(`^[A-Za-z0-9._*?-]+$`)

// checkContextName returns why name cannot be a declared context name, or
// "".
func checkContextName(name string) string {
	switch {
	case name == "":
		return "must not be empty"
	case len(name) > MaxContextNameLen:
		return fmt.Sprintf("is %d characters long (maximum %d)", len(name), MaxContextNameLen)
	case !contextNameRe.MatchString(name):
		return "may only contain letters, digits, '.', '_', '-' and the wildcards '*' and '?'"
	}
	return ""
}

// checkContextNames validates a job's declared contexts: each a valid name,
// none twice. It returns the index of the offending entry and why, or -1.
func checkContextNames(names []string) (int, string) {
	seen := make(map[string]bool, len(names))
	for i, n := range names {
		if msg := checkContextName(n); msg != "" {
			return i, fmt.Sprintf("context name %q %s", n, msg)
		}
		if seen[n] {
			return i, fmt.Sprintf("context %q is listed twice", n)
		}
		seen[n] = true
	}
	return -1, ""
}

// contextList decodes a job's `contexts:` (a context name or a list of
// names), reporting each bad entry at its position.
func (f *yfile) contextList(n ast.Node, what string) []string {
	items, ok := f.sequence(n, what, true)
	if !ok {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, it := range items {
		s, ok := f.str(it, what+" entries")
		if !ok {
			continue
		}
		if msg := checkContextName(s); msg != "" {
			f.errorf(it, "%s: context name %q %s", what, s, msg)
			continue
		}
		if seen[s] {
			f.errorf(it, "%s: context %q is listed twice", what, s)
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out
}
