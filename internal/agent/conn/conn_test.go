package conn

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/protocol"
)

func TestBackoffDelay(t *testing.T) {
	for n := 0; n < 20; n++ {
		lo := BackoffDelay(n, 0)
		hi := BackoffDelay(n, 0.999999)
		base := float64(time.Second)
		for i := 0; i < n; i++ {
			base *= 1.5
		}
		if base <= float64(MaxDelay) {
			if lo != time.Duration(base) {
				t.Errorf("n=%d lo=%s want %s", n, lo, time.Duration(base))
			}
			if hi < lo || float64(hi) >= 1.5*base+1 {
				t.Errorf("n=%d hi=%s out of [1,1.5)×%s", n, hi, time.Duration(base))
			}
		}
		if hi > MaxDelay || lo > MaxDelay {
			t.Errorf("n=%d exceeds cap: %s %s", n, lo, hi)
		}
	}
	if BackoffDelay(0, 0) != time.Second || BackoffDelay(2, 0) != 2250*time.Millisecond || BackoffDelay(50, 0.5) != MaxDelay {
		t.Error("fixed points")
	}
}

func TestOutboxDropsOnlyOldestLogs(t *testing.T) {
	o := newOutbox(3)
	o.push(&protocol.JobStatus{Type: protocol.TypeJobStatus, JobID: "j", State: "running"})
	for i := 0; i < 6; i++ {
		o.push(&protocol.LogChunk{Type: protocol.TypeLogChunk, JobID: "j", StepIndex: 0, Seq: int64(i),
			Lines: []protocol.LogLine{{Text: "a"}, {Text: "b"}}})
	}
	o.push(&protocol.StepStatus{Type: protocol.TypeStepStatus, JobID: "j", State: "success"})
	o.push(&protocol.JobStatus{Type: protocol.TypeJobStatus, JobID: "j", State: "success"})

	var got []string
	for {
		it, _, err := o.next()
		if err != nil {
			t.Fatal(err)
		}
		if it == nil {
			break
		}
		switch m := it.msg.(type) {
		case *protocol.JobStatus:
			got = append(got, "job:"+m.State)
		case *protocol.StepStatus:
			got = append(got, "step:"+m.State)
		case *protocol.LogChunk:
			got = append(got, "log:"+m.Lines[0].Text+":"+strconv.FormatInt(m.Seq, 10))
		}
		o.done(it, true)
	}
	want := []string{"job:running", "log:" + DroppedLinesMarker(6) + ":0", "log:a:3", "log:a:4", "log:a:5", "step:success", "job:success"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}
