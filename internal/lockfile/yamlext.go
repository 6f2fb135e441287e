package lockfile

import (
	"fmt"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"kici.dev/kici/internal/suggest"
)

// maxMergeDepth bounds nested merge keys (an alias may point back into the
// mapping that merges it).
const maxMergeDepth = 16

// mergeEntries expands a YAML merge key (`<<: *base` or `<<: [*a, *b]`,
// YAML 1.1 merge key type) into the merged mapping's entries, marked as
// merged so that applyMerges lets the mapping's own keys win.
func (f *yfile) mergeEntries(mv *ast.MappingValueNode, what string) []kv {
	if f.mergeDepth >= maxMergeDepth {
		f.errorf(mv.Key, "merge keys (<<) nested more than %d deep", maxMergeDepth)
		return nil
	}
	f.mergeDepth++
	defer func() { f.mergeDepth-- }()
	var sources []ast.Node
	if seq, ok := f.resolve(mv.Value).(*ast.SequenceNode); ok {
		sources = seq.Values
	} else {
		sources = []ast.Node{mv.Value}
	}
	var out []kv
	for _, src := range sources {
		entries, ok := f.mapping(src, what+" merge (<<) value")
		if !ok {
			continue
		}
		for _, e := range entries {
			e.merged = true
			out = append(out, e)
		}
	}
	return out
}

// applyMerges drops merged entries whose key the mapping sets itself or an
// earlier merge source already gave (YAML merge: explicit keys win, then the
// first source that has the key).
func applyMerges(entries []kv) []kv {
	own := map[string]bool{}
	hasMerged := false
	for _, e := range entries {
		if e.merged {
			hasMerged = true
		} else {
			own[e.key] = true
		}
	}
	if !hasMerged {
		return entries
	}
	seen := map[string]bool{}
	out := entries[:0:0]
	for _, e := range entries {
		if e.merged && (own[e.key] || seen[e.key]) {
			continue
		}
		seen[e.key] = true
		e.merged = false
		out = append(out, e)
	}
	return out
}

// didYouMean suggests the allowed key closest to an unknown one: the same
// letters ignoring case, '-' and '_' (runs-on → runsOn), or at most two
// edits away. It returns "" when nothing is close.
func didYouMean(key string, allowed []string) string {
	norm := func(s string) string {
		return strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(s))
	}
	best, bestD := "", 3
	for _, a := range allowed {
		if norm(a) == norm(key) {
			return fmt.Sprintf("; did you mean %q?", a)
		}
		if d := suggest.Distance(strings.ToLower(key), strings.ToLower(a)); d < bestD {
			best, bestD = a, d
		}
	}
	if best == "" || len(key) <= bestD {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}
