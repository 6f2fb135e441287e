package runs

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// logSub records every event it hears in a log shared with the other
// subscribers, under its name.
type logSub struct {
	name    string
	log     *[]string
	admit   bool
	readyOK bool
}

func (s logSub) Admit(_ context.Context, runID string) bool {
	*s.log = append(*s.log, s.name+" admit")
	return s.admit
}

func (s logSub) JobReady(_ context.Context, j *store.Job) error {
	*s.log = append(*s.log, s.name+" ready "+j.JobName)
	if !s.readyOK {
		return errors.New("refused")
	}
	return nil
}

func (s logSub) JobFinished(j *store.Job) {
	*s.log = append(*s.log, fmt.Sprintf("%s job %s %s", s.name, j.JobName, j.Status))
}

func (s logSub) RunFinished(r *store.Run) {
	*s.log = append(*s.log, fmt.Sprintf("%s run %s", s.name, r.Status))
}

// Subscribers hear every event in the order they subscribed
// (TrackerDeps.Subscribers, then Subscribe): the order the server relies
// on, e.g. the resumer before run control on a finished run.
func TestSubscribersHearEventsInOrder(t *testing.T) {
	f := newFixture(t)
	var log []string
	a := logSub{name: "a", log: &log, admit: true, readyOK: true}
	b := logSub{name: "b", log: &log, admit: true, readyOK: true}
	f.tr.Subscribe(a, b)
	_, ids := f.createRun(js("build"))
	f.start(ids["build"], t0)
	f.finish(ids["build"], status.JobSuccess, t0)
	want := []string{"a admit", "b admit", "a ready build", "b ready build",
		"a job build success", "b job build success", "a run success", "b run success"}
	if fmt.Sprint(log) != fmt.Sprint(want) {
		t.Errorf("events:\n got %q\nwant %q", log, want)
	}
}

// A subscriber that refuses a released job stops the ones after it (the
// job stays queued for Recover), and one that refuses admission keeps the
// run's jobs pending without asking the others.
func TestSubscriberRefusalsStopTheRest(t *testing.T) {
	f := newFixture(t)
	var log []string
	f.tr.Subscribe(logSub{name: "a", log: &log, admit: true}, logSub{name: "b", log: &log, admit: true, readyOK: true})
	_, ids := f.createRun(js("build"))
	if fmt.Sprint(log) != fmt.Sprint([]string{"a admit", "b admit", "a ready build"}) {
		t.Errorf("a failed hand-off reached %q", log)
	}
	f.wantStatus(ids, map[string]status.Job{"build": status.JobQueued})

	g := newFixture(t)
	log = nil
	g.tr.Subscribe(logSub{name: "a", log: &log}, logSub{name: "b", log: &log, admit: true, readyOK: true})
	_, ids = g.createRun(js("build"))
	if fmt.Sprint(log) != fmt.Sprint([]string{"a admit"}) {
		t.Errorf("a refused admission reached %q", log)
	}
	g.wantStatus(ids, map[string]status.Job{"build": status.JobPending})
	if g.enq.count("build") != 0 {
		t.Error("a run not admitted had its job enqueued")
	}
}
