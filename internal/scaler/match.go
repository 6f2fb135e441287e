package scaler

import "kici.dev/kici/internal/scaler/scalerconfig"

// candidate is a label set that matched a job.
type candidate struct {
	sc *scalerState
	ls *LabelSet
}

// findBackend is scalerconfig.Match (KiCI findBackendForLabels) over the
// routable (non-retiring) scalers, in config order.
func findBackend(scalers []*scalerState, runsOn, exclude []string) (candidate, bool) {
	routable := make([]*scalerState, 0, len(scalers))
	entries := make([]*Entry, 0, len(scalers))
	for _, sc := range scalers {
		if !sc.retiring {
			routable = append(routable, sc)
			entries = append(entries, sc.entry)
		}
	}
	i, ls, ok := scalerconfig.Match(entries, runsOn, exclude)
	if !ok {
		return candidate{}, false
	}
	return candidate{routable[i], ls}, true
}
