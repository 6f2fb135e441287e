package logstream

import (
	"strings"
	"testing"
)

// BenchmarkMask measures masking one typical log line against a job's
// secrets (most lines hold none).
func BenchmarkMask(b *testing.B) {
	m := NewMasker([]string{"s3cr3t-token-value", "hunter2hunter2", "AKIAEXAMPLEKEY123456", "a-much-longer-secret-" + strings.Repeat("x", 40)})
	line := "2026-12-02T01:02:03Z INFO compiling package kici.dev/kici/internal/dispatch (cached) with token s3cr3t-token-value"
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		_ = m.Mask(line)
	}
}
