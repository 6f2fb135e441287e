package servermetrics

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/protocol"
)

// fakeSink answers AppendFrom with res and Append with err.
type fakeSink struct {
	res logstore.AppendResult
	err error
}

func (f fakeSink) Append(string, string, int, []protocol.LogLine) error { return f.err }

func (f fakeSink) AppendFrom(string, string, int, int64, []protocol.LogLine) (logstore.AppendResult, error) {
	return f.res, nil
}

// counter reads name{result=result} from reg (0 when absent).
func counter(t *testing.T, reg *prometheus.Registry, name, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// The log lines an agent sends are counted by what the store did with
// them: stored (with their bytes, duplicates not counted), dropped
// (numbered but never arrived, or refused), capped and late.
func TestCountLogsCountsWhatTheStoreDid(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	lines := []protocol.LogLine{{Text: "dup"}, {Text: "hello"}, {Text: "world!"}}
	sink := m.CountLogs(fakeSink{res: logstore.AppendResult{Stored: 2, Duplicate: 1, Missing: 4, Capped: 1, Late: 3}})
	if _, err := sink.AppendFrom("r", "j", 0, 10, lines); err != nil {
		t.Fatal(err)
	}
	for result, want := range map[string]float64{"stored": 2, "dropped": 4, "capped": 1, "late": 3} {
		if got := counter(t, reg, "kici_orch_log_lines_total", result); got != want {
			t.Errorf("lines %s = %v, want %v", result, got, want)
		}
	}
	if got := counter(t, reg, "kici_orch_log_bytes_total", "stored"); got != 11 {
		t.Errorf("bytes stored = %v, want 11 (hello + world!)", got)
	}

	refused := m.CountLogs(fakeSink{err: errors.New("disk full")})
	if err := refused.Append("r", "j", 0, lines[:1]); err == nil {
		t.Fatal("the sink's error was swallowed")
	}
	if got := counter(t, reg, "kici_orch_log_lines_total", "dropped"); got != 5 {
		t.Errorf("lines dropped = %v, want 5", got)
	}
}
