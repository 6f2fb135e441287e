package logstore

import (
	"strings"
	"testing"

	"kici.dev/kici/internal/protocol"
)

type capper interface {
	Store
	SetStepMaxBytes(n int64)
}

// A step whose output passes the cap keeps what came before, gets one
// marker line, and every later agent line is dropped but acknowledged (so
// the agent does not resend it and the step is not failed); a restart
// does not write a second marker; orchestrator lines are still stored.
func TestStepLogSizeCapStoresOneMarker(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() Store) {
		s := open().(capper)
		s.SetStepMaxBytes(20 * 60) // about 20 lines of "line N" with framing
		res, err := s.AppendFrom(runID, jobID, 3, 0, lines(0, 50))
		if err != nil {
			t.Fatal(err)
		}
		if res.Acked != 50 || res.Capped == 0 || res.Stored+res.Capped != 51 {
			t.Fatalf("AppendFrom past the cap = %+v", res)
		}
		kept := res.Stored - 1
		s2 := open().(capper) // a restart
		s2.SetStepMaxBytes(20 * 60)
		res, err = s2.AppendFrom(runID, jobID, 3, 50, lines(50, 10))
		if err != nil || res.Stored != 0 || res.Capped != 10 || res.Acked != 60 {
			t.Fatalf("AppendFrom after the cap = %+v, %v", res, err)
		}
		if err := s2.Append(runID, jobID, 3, []protocol.LogLine{{Text: "step finished"}}); err != nil {
			t.Fatal(err)
		}
		got := texts(t, s2, 3)
		if len(got) != kept+2 || strings.Join(got[:kept], "|") != want(kept) {
			t.Fatalf("log = %q", got)
		}
		if !strings.HasPrefix(got[kept], CapMarkerPrefix) || !strings.Contains(got[kept], "KICI_STEP_LOG_MAX_BYTES") {
			t.Fatalf("marker line = %q", got[kept])
		}
		if got[kept+1] != "step finished" {
			t.Fatalf("orchestrator line after the cap = %q", got[kept+1])
		}
		if st := s.Stats().LinesCapped + s2.Stats().LinesCapped; st != int64(60-kept) {
			t.Fatalf("LinesCapped = %d, want %d", st, 60-kept)
		}
		// Another step is not affected.
		if res, err := s2.AppendFrom(runID, jobID, 4, 0, lines(0, 5)); err != nil || res.Stored != 5 {
			t.Fatalf("other step: %+v %v", res, err)
		}
	})
}
