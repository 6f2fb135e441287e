package logstore

import (
	"fmt"
	"testing"
	"time"

	"kici.dev/kici/internal/protocol"
)

// BenchmarkAppend measures appending a batch of 100 short lines to one
// step's log.
func BenchmarkAppend(b *testing.B) {
	fs := NewFS(b.TempDir())
	batch := make([]protocol.LogLine, 100)
	for i := range batch {
		batch[i] = protocol.LogLine{Text: fmt.Sprintf("line %d of the benchmark step output", i), Stream: protocol.StreamStdout, Timestamp: time.Now().UnixMilli()}
	}
	b.ReportMetric(100, "lines/op")
	for b.Loop() {
		if err := fs.Append("run-1", "job-1", 0, batch); err != nil {
			b.Fatal(err)
		}
	}
}
