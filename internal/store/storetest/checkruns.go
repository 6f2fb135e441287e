package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"kici.dev/kici/internal/store"
)

// testCheckRuns covers CheckRunStore: a row is created by the first desired
// state and keeps its delivery columns when the desired state changes; a
// new desired hash resets the retry counters; deliveries record success
// (external id kept), failure (retry time) and giving up; Open and DueAt
// select what the reporter must look at; the TTL sweep removes old rows.
func testCheckRuns(t *testing.T, s store.Store) {
	ctx := context.Background()
	mk := func(job, sha, state, hash string, terminal bool) *store.CheckRun {
		return &store.CheckRun{JobID: job, RunID: "run-" + sha, SourceID: "src", Provider: store.CheckProviderGitHubChecks, Repo: "acme/app",
			SHA: sha, Name: "ci / " + job, DesiredState: state, DesiredBody: []byte(`{"status":"` + state + `"}`), DesiredHash: hash,
			DesiredTerminal: terminal, DesiredAt: at(1)}
	}
	must(t, s.UpsertCheckRunDesired(ctx, mk("j1", "aaa", "queued", "h1", false)))
	must(t, s.UpsertCheckRunDesired(ctx, mk("j2", "aaa", "queued", "h1", false)))
	must(t, s.UpsertCheckRunDesired(ctx, mk("j3", "bbb", "completed/success", "h9", true)))
	if _, err := s.GetCheckRun(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown job: %v", err)
	}
	if err := s.RecordCheckRunDelivery(ctx, "nope", store.CheckRunDelivery{OK: true, At: at(2)}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("delivery of unknown job: %v", err)
	}
	must(t, s.MarkCheckRunCreateAttempted(ctx, "j1", at(2)))
	must(t, s.RecordCheckRunDelivery(ctx, "j1", store.CheckRunDelivery{OK: true, Hash: "h1", State: "queued", ExternalID: "4711", At: at(3)}))
	c, err := s.GetCheckRun(ctx, "j1")
	must(t, err)
	if c.ExternalID != "4711" || c.PostedHash != "h1" || c.PostedState != "queued" || c.PostedAt == nil || !c.PostedAt.Equal(at(3)) ||
		c.CreateAttemptedAt != nil || string(c.DesiredBody) != `{"status":"queued"}` || c.Repo != "acme/app" || c.Name != "ci / j1" {
		t.Errorf("after delivery: %+v", c)
	}
	// A failed delivery of the next state keeps the external id.
	must(t, s.UpsertCheckRunDesired(ctx, mk("j1", "aaa", "in_progress", "h2", false)))
	next := at(60)
	must(t, s.RecordCheckRunDelivery(ctx, "j1", store.CheckRunDelivery{Hash: "h2", Err: "HTTP 502", StatusCode: 502, NextAttemptAt: &next, At: at(4)}))
	c, err = s.GetCheckRun(ctx, "j1")
	must(t, err)
	if c.ExternalID != "4711" || c.Attempts != 1 || c.LastStatusCode != 502 || c.LastError != "HTTP 502" || c.NextAttemptAt == nil ||
		!c.NextAttemptAt.Equal(next) || c.PostedState != "queued" || c.DesiredState != "in_progress" {
		t.Errorf("after failure: %+v", c)
	}
	due := func(when time.Time) []string {
		rows, err := s.ListCheckRuns(ctx, store.CheckRunFilter{DueAt: &when})
		must(t, err)
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.JobID)
		}
		return ids
	}
	if got := due(at(10)); len(got) != 2 || got[0] != "j2" || got[1] != "j3" {
		t.Errorf("due before the retry time = %v, want [j2 j3]", got)
	}
	if got := due(at(61)); len(got) != 3 {
		t.Errorf("due after the retry time = %v", got)
	}
	// The same desired hash keeps the counters; a new one resets them.
	must(t, s.UpsertCheckRunDesired(ctx, mk("j1", "aaa", "in_progress", "h2", false)))
	if c, _ = s.GetCheckRun(ctx, "j1"); c.Attempts != 1 || c.NextAttemptAt == nil {
		t.Errorf("same hash reset the retry state: %+v", c)
	}
	must(t, s.UpsertCheckRunDesired(ctx, mk("j1", "aaa", "in_progress", "h3", false)))
	if c, _ = s.GetCheckRun(ctx, "j1"); c.Attempts != 0 || c.NextAttemptAt != nil || c.LastError != "HTTP 502" {
		t.Errorf("new hash: %+v (attempts and retry time reset, last error kept)", c)
	}
	// Giving up ends a state: it is neither due nor open.
	must(t, s.RecordCheckRunDelivery(ctx, "j3", store.CheckRunDelivery{Hash: "h9", Err: "HTTP 422", StatusCode: 422, GaveUp: true, At: at(5)}))
	if got := due(at(100)); len(got) != 2 || got[0] != "j1" || got[1] != "j2" {
		t.Errorf("due after giving up on j3 = %v", got)
	}
	open, err := s.ListCheckRuns(ctx, store.CheckRunFilter{Open: true})
	must(t, err)
	if len(open) != 2 {
		t.Errorf("open rows = %d, want 2 (j3 given up)", len(open))
	}
	// A delivered terminal state is closed.
	must(t, s.UpsertCheckRunDesired(ctx, mk("j2", "aaa", "completed/failure", "h4", true)))
	must(t, s.RecordCheckRunDelivery(ctx, "j2", store.CheckRunDelivery{OK: true, Hash: "h4", State: "completed/failure", At: at(6)}))
	open, err = s.ListCheckRuns(ctx, store.CheckRunFilter{Open: true})
	must(t, err)
	if len(open) != 1 || open[0].JobID != "j1" {
		t.Errorf("open rows after j2 completed = %+v", open)
	}
	bySHA, err := s.ListCheckRuns(ctx, store.CheckRunFilter{SHA: "aaa"})
	must(t, err)
	byRun, err := s.ListCheckRuns(ctx, store.CheckRunFilter{RunID: "run-bbb"})
	must(t, err)
	if len(bySHA) != 2 || len(byRun) != 1 || byRun[0].JobID != "j3" || byRun[0].LastStatusCode != 422 {
		t.Errorf("by sha %d rows, by run %+v", len(bySHA), byRun)
	}
	// A failed delivery lands in the event log once per failed state.
	fe := &store.EventLogEntry{DeliveryID: "forge-status:j3:h9", OrgID: "acme", SourceID: "src", Event: "check_run.delivery", Source: "internal",
		Provider: store.CheckProviderGitHubChecks, RepoIdentifier: "acme/app", Status: store.EventLogFailed, RunIDs: []string{"run-bbb"},
		ErrorMessage: "completed/success: HTTP 422"}
	must(t, s.RecordCheckRunFailure(ctx, fe))
	if err := s.RecordCheckRunFailure(ctx, &store.EventLogEntry{DeliveryID: "forge-status:j3:h9", Status: store.EventLogFailed}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("second failure entry of one state: %v, want ErrConflict", err)
	}
	if e, err := s.GetEventLog(ctx, "acme", "forge-status:j3:h9"); err != nil || e.Status != store.EventLogFailed || e.ErrorMessage != "completed/success: HTTP 422" {
		t.Errorf("event log entry %+v %v", e, err)
	}
	// The sweep removes rows last updated before the cut.
	n, err := s.DeleteCheckRunsBefore(ctx, time.Now().Add(time.Hour))
	must(t, err)
	if n != 3 {
		t.Errorf("swept %d rows, want 3", n)
	}
	if rest, _ := s.ListCheckRuns(ctx, store.CheckRunFilter{}); len(rest) != 0 {
		t.Errorf("rows left after the sweep: %d", len(rest))
	}
}
