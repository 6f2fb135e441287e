package servermetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"kici.dev/kici/internal/logstore"
)

// RegisterLogArchive exports what this node archived from the step-log
// archive a:
// kici_orch_log_archived_steps_total, …_lines_total and …_bytes_total
// (uncompressed JSON Lines bytes).
func RegisterLogArchive(reg prometheus.Registerer, a *logstore.Archived) {
	for _, c := range []struct {
		name, help string
		get        func(logstore.ArchiveStats) int64
	}{
		{"kici_orch_log_archived_steps_total", "Step logs this node archived to the blob store.", func(s logstore.ArchiveStats) int64 { return s.Steps }},
		{"kici_orch_log_archived_lines_total", "Lines of the step logs this node archived.", func(s logstore.ArchiveStats) int64 { return s.Lines }},
		{"kici_orch_log_archived_bytes_total", "Uncompressed bytes (JSON Lines) of the step logs this node archived.", func(s logstore.ArchiveStats) int64 { return s.Bytes }},
	} {
		get := c.get
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help},
			func() float64 { return float64(get(a.ArchiveStats())) }))
	}
}
