package contexts

import "kici.dev/kici/internal/store"

// VarLayer is one bound context's variable data: its org-level variables
// and its source overrides for the run's routing key (the caller filters
// the overrides to that key).
type VarLayer struct {
	Variables []*store.ContextVariable
	Overrides []*store.ContextSourceOverride
}

// MergeVariables folds the layers, given in bound order, into the job's
// context variables (KiCI variable resolution). Within a layer the source
// overrides replace the context's variables except locked ones — a locked
// variable is never overridden — and an override of a key the context does
// not define adds it. Across layers the later context wins for the same
// key. The result is never nil.
func MergeVariables(layers []VarLayer) map[string]string {
	out := map[string]string{}
	for _, l := range layers {
		vals := map[string]string{}
		locked := map[string]bool{}
		for _, v := range l.Variables {
			if v == nil {
				continue
			}
			vals[v.Key] = v.Value
			locked[v.Key] = v.Locked
		}
		for _, o := range l.Overrides {
			if o == nil || locked[o.Key] {
				continue
			}
			vals[o.Key] = o.Value
		}
		for k, v := range vals {
			out[k] = v
		}
	}
	return out
}
