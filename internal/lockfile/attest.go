package lockfile

import "github.com/goccy/go-yaml/ast"

// attestPaths decodes a step's `attest:` list (a string or a list of
// strings): files relative to the checkout, which must not leave it.
func (f *yfile) attestPaths(n ast.Node, what string) []string {
	items, ok := f.sequence(n, what, true)
	if !ok {
		return nil
	}
	var out []string
	for _, it := range items {
		p, ok := f.nonEmptyStr(it, what+" entries")
		if !ok {
			continue
		}
		if msg := checkWorkDir(p); msg != "" {
			f.errorf(it, "%s path %q %s", what, p, msg)
			continue
		}
		out = append(out, p)
	}
	if len(items) == 0 {
		f.errorf(n, "%s must list at least one file", what)
	}
	return out
}
