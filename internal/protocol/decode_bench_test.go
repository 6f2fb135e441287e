package protocol

import (
	"encoding/json"
	"strconv"
	"testing"
)

func benchChunk() *LogChunk {
	off := int64(0)
	lc := &LogChunk{Type: TypeLogChunk, RunID: "0b6c0f5e-2a43-4c43-9b0e-5f1a2b3c4d5e", JobID: "7d1e2f3a-4b5c-4d6e-8f90-a1b2c3d4e5f6", Offset: &off}
	for i := 0; i < 2000; i++ {
		lc.Lines = append(lc.Lines, LogLine{Timestamp: 1764638400000 + int64(i), Stream: StreamStdout, Text: strconv.Itoa(i)})
	}
	return lc
}

func BenchmarkDecodeLogChunk(b *testing.B) {
	frame, _ := json.Marshal(benchChunk())
	b.SetBytes(int64(len(frame)))
	for i := 0; i < b.N; i++ {
		if _, err := Decode(frame); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*2000)/b.Elapsed().Seconds(), "lines/s")
}

func BenchmarkEncodeLogChunk(b *testing.B) {
	lc := benchChunk()
	for i := 0; i < b.N; i++ {
		if _, err := json.Marshal(lc); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*2000)/b.Elapsed().Seconds(), "lines/s")
}
