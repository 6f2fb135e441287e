package contexts

import (
	"fmt"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trigger/pattern"
)

// Unsatisfiable is the registration-time check of a job's statically bound
// contexts (KiCI registration satisfiability). It returns an error only
// when no run could ever pass the gates: a bound context is disabled, or
// two contexts restrict branches, trigger types or repositories to disjoint
// sets that are both entirely literal. Trigger-type filters are compared
// exactly at dispatch, so they always count as literal; a branch or
// repository list with any glob syntax is left to the dispatch-time gates,
// as are names that resolved to nothing (the caller drops those). The
// error names the contexts and the aspect.
func Unsatisfiable(bound []*store.Context) error {
	for _, c := range bound {
		if c != nil && !c.Enabled {
			return fmt.Errorf("context '%s' is disabled", c.Name)
		}
	}
	aspects := []struct {
		name      string
		get       func(*store.Context) []string
		globAware bool
	}{
		{"branches", func(c *store.Context) []string { return c.BranchRestrictions }, true},
		{"trigger types", func(c *store.Context) []string { return c.TriggerTypeFilters }, false},
		{"repositories", func(c *store.Context) []string { return c.RepoPatterns }, true},
	}
	for i, a := range bound {
		for _, b := range bound[i+1:] {
			if a == nil || b == nil {
				continue
			}
			for _, asp := range aspects {
				x, y := asp.get(a), asp.get(b)
				if len(x) == 0 || len(y) == 0 {
					continue
				}
				if asp.globAware && (hasGlob(x) || hasGlob(y)) {
					continue
				}
				if disjoint(x, y) {
					return fmt.Errorf("contexts '%s' and '%s' restrict %s to disjoint sets %s and %s: no run can satisfy both", a.Name, b.Name, asp.name, list(x), list(y))
				}
			}
		}
	}
	return nil
}

func hasGlob(vals []string) bool {
	for _, v := range vals {
		if pattern.IsGlob(v) {
			return true
		}
	}
	return false
}

func disjoint(x, y []string) bool {
	in := make(map[string]bool, len(x))
	for _, v := range x {
		in[v] = true
	}
	for _, v := range y {
		if in[v] {
			return false
		}
	}
	return true
}
