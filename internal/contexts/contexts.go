// Package contexts is the dispatch-time context engine: it decides what the
// contexts a job names mean for that job, without doing any I/O of its own
// beyond the Lookup it is given.
//
// The flow for one job follows KiCI's dispatch-time context flow:
//
//  1. Resolve the job's declared names (lock `contexts`) in declared order.
//     Each name is matched exactly first, then against the glob contexts of
//     the org (Match); a name that matches nothing is skipped with a
//     warning, never rejected. A context reached twice is kept once.
//  2. CheckGates runs the hard gates of every bound context in order
//     (disabled, branch restriction, trigger-type filter, repository
//     pattern); the first failure rejects the job with a Rejection.
//  3. Aggregate folds the bound contexts into the most restrictive Policy
//     (trust floor, reviewers, wait timer, hold expiry), and Evaluate turns
//     it into a Decision for the job in one pass: trust gate, then
//     reviewers, then wait timer; the first that does not pass holds the
//     job. Done records the holds already decided, so re-evaluating after an
//     approval moves on to the next one.
//  4. Once the job passes, MergeVariables folds the contexts' variables and
//     the run's source overrides (locked variables are never overridden),
//     last-wins in bound order, and ScopeGranted decides, per agent, which
//     secret scopes each context's bindings grant.
//
// At registration time, Unsatisfiable rejects only a job whose bound
// contexts can provably never all pass the gates; anything involving globs
// is left to the dispatch-time gates.
//
// kici departs from KiCI in two places:
//
//   - Secrets are granted only through the bindings of contexts that passed
//     the gates, and a glob-matched context is treated exactly like one
//     matched by name. KiCI looked secrets up by the declared name with an
//     exact-name fetch, so a context reached only through a glob pattern
//     contributed variables and gates but silently no secrets.
//   - A run of trust tier unknown (a pull request from a fork) receives a
//     context's secrets only when that context sets AllowUntrusted
//     (SecretsAllowed). KiCI only stripped registry credentials from
//     untrusted runs.
package contexts

import (
	"context"
	"errors"
	"sort"
	"strings"
	"unicode/utf8"

	"kici.dev/kici/internal/store"
)

// Lookup is the read access to an org's contexts that matching needs;
// store.Store satisfies it.
type Lookup interface {
	// GetContext returns the context name of org, or store.ErrNotFound.
	GetContext(ctx context.Context, orgID, name string) (*store.Context, error)
	// ListContexts returns the contexts of org.
	ListContexts(ctx context.Context, orgID string) ([]*store.Context, error)
}

// wildcardChars are the characters KiCI's context matching counts as
// wildcards when ranking glob contexts by specificity.
const wildcardChars = "*?[]{}()!|+@"

// Match resolves a declared context name for org the way KiCI's context
// matching does: an exact name match first; otherwise, among the contexts
// of type glob whose GlobPattern matches name, the most specific one — the
// pattern with more literal (non-wildcard) characters wins, ties go to the
// pattern with fewer wildcard characters (*?[]{}()!|+@), remaining ties to
// the alphabetically first context name. A glob context with an invalid
// pattern never matches. It returns nil, nil when nothing matches, and only
// lookup errors as errors.
func Match(ctx context.Context, l Lookup, orgID, name string) (*store.Context, error) {
	c, err := l.GetContext(ctx, orgID, name)
	switch {
	case err == nil:
		return c, nil
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	all, err := l.ListContexts(ctx, orgID)
	if err != nil {
		return nil, err
	}
	var best *store.Context
	var bestLit, bestWild int
	for _, c := range all {
		if c == nil || c.Type != store.ContextTypeGlob || c.GlobPattern == "" {
			continue
		}
		if !matchGlob(c.GlobPattern, name) {
			continue
		}
		lit, wild := specificity(c.GlobPattern)
		if best == nil || lit > bestLit ||
			(lit == bestLit && (wild < bestWild || (wild == bestWild && c.Name < best.Name))) {
			best, bestLit, bestWild = c, lit, wild
		}
	}
	return best, nil
}

// specificity returns the number of literal and of wildcard characters of a
// glob pattern.
func specificity(p string) (literal, wildcard int) {
	for _, r := range p {
		if strings.ContainsRune(wildcardChars, r) {
			wildcard++
		}
	}
	return utf8.RuneCountInString(p) - wildcard, wildcard
}

// Bound is one context bound to a job: the name the job declared and the
// context it resolved to (possibly a glob context of another name).
type Bound struct {
	Declared string
	Context  *store.Context
}

// Resolve matches each declared name with Match, in declared order. It
// returns the bound contexts in that order — a context reached by several
// names is kept once, at its first position — and the names that matched
// nothing, which callers report as warnings (KiCI skips them and never
// rejects a job for them). Only lookup errors are errors.
func Resolve(ctx context.Context, l Lookup, orgID string, names []string) (bound []Bound, skipped []string, err error) {
	seen := map[string]bool{}
	for _, n := range names {
		c, err := Match(ctx, l, orgID, n)
		if err != nil {
			return nil, nil, err
		}
		if c == nil {
			skipped = append(skipped, n)
			continue
		}
		key := c.ID
		if key == "" {
			key = "name:" + c.Name
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		bound = append(bound, Bound{Declared: n, Context: c})
	}
	return bound, skipped, nil
}

// Contexts returns the contexts of bound in order.
func Contexts(bound []Bound) []*store.Context {
	out := make([]*store.Context, len(bound))
	for i, b := range bound {
		out[i] = b.Context
	}
	return out
}

// sortedUnique returns the distinct values of in, sorted.
func sortedUnique(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	out := append([]string(nil), in...)
	sort.Strings(out)
	w := 1
	for i := 1; i < len(out); i++ {
		if out[i] != out[w-1] {
			out[w] = out[i]
			w++
		}
	}
	return out[:w]
}
