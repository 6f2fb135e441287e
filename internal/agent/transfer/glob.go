package transfer

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"kici.dev/kici/internal/trigger/pattern"
)

// MatchFiles returns the regular files under root (slash-separated,
// relative, sorted) matching any of globs and none of the "!"-prefixed
// ones. Globs use the trigger path syntax (`*` within a segment, `**`
// across segments). The .git directory is never walked.
func MatchFiles(root string, globs []string) ([]string, error) {
	var inc, exc []*pattern.Glob
	for _, g := range globs {
		neg := strings.HasPrefix(g, "!")
		c, err := pattern.CompileGlob(strings.TrimPrefix(g, "!"))
		if err != nil {
			return nil, fmt.Errorf("glob %q: %w", g, err)
		}
		if neg {
			exc = append(exc, c)
		} else {
			inc = append(inc, c)
		}
	}
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" && p != root {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if matchAny(inc, rel) && !matchAny(exc, rel) {
			out = append(out, rel)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

func matchAny(gs []*pattern.Glob, s string) bool {
	for _, g := range gs {
		if g.Match(s) {
			return true
		}
	}
	return false
}
