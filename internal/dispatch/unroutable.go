package dispatch

import (
	"fmt"
	"sort"
	"strings"

	"kici.dev/kici/internal/store"
)

// ReasonUnroutablePrefix starts the pending reason of a queued job that no
// connected agent fits and no scaler label set can spawn an agent for
// (KiCI's "unroutable" jobs). runctl ends such a job once it has stayed so
// for the unroutable grace (KICI_UNROUTABLE_GRACE_MS); an agent with the
// labels that connects meanwhile takes it as usual.
const ReasonUnroutablePrefix = "unroutable: "

// unroutableReason is e's pending reason when nothing can serve it: why
// no connected agent fits (base), and that no scaler can spawn one.
func unroutableReason(e *store.QueueEntry, base string) string {
	labels := append([]string{}, e.RunsOnLabels...)
	sort.Strings(labels)
	return fmt.Sprintf("%s%s; no scaler label set serves runsOn [%s]", ReasonUnroutablePrefix, base, strings.Join(labels, " "))
}
