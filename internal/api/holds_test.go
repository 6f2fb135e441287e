package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/approval"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/store"
)

// newModeEnv is env over a real SQLite store with the real approval
// decider (approvals false: none) in the given orchestrator mode.
func newModeEnv(t *testing.T, mode config.Mode, approvals bool) *env {
	t.Helper()
	st, a := openTestStore(t, t.TempDir())
	owner := issueToken(t, a, auth.RoleOwner)
	auditor := issueToken(t, a, auth.RoleAuditor)
	d := Deps{Store: st, Auth: a, Mode: mode}
	if approvals {
		d.Approvals = approval.NewDecider(st, nil)
	}
	srv := httptest.NewServer(NewRouter(d))
	t.Cleanup(srv.Close)
	return &env{t: t, st: st, srv: srv, owner: owner, auditor: auditor}
}

// addHold stores a pending hold on run (job-scoped when job is non-nil).
func (e *env) addHold(run *store.Run, job *store.Job, queue hold.Queue, reason hold.Reason, clauses ...string) *store.HeldRun {
	e.t.Helper()
	h := &store.HeldRun{OrgID: run.OrgID, RunID: run.ID, HoldType: hold.Reviewer, QueueType: queue,
		HoldScope: hold.ScopeWorkflow, Reason: reason, ExpiresAt: time.Now().Add(time.Hour).UTC()}
	if queue == hold.QueueSecurity {
		h.HoldType = hold.Security
	}
	if job != nil {
		h.JobID, h.HoldScope, h.Contexts = job.ID, hold.ScopeJob, []string{"release"}
	}
	for _, c := range clauses {
		h.Clauses = append(h.Clauses, store.ApprovalClause{Kind: "user", Value: c})
	}
	ok, err := e.st.CreateHeldRun(context.Background(), h, []status.Job{status.JobPending})
	if err != nil || !ok {
		e.t.Fatalf("create hold: %v %v", ok, err)
	}
	return h
}

func TestHeldRunListAndDecisions(t *testing.T) {
	e := newModeEnv(t, "", true)
	now := time.Now().UTC()
	run, jobs := e.addRun("deploy", status.RunRunning, "o/app", now, "ship")
	review := e.addHold(run, jobs[0], hold.QueueContext, "context 'release' requires approval from alice, bob", "alice", "bob")
	other, _ := e.addRun("ci", status.RunHeld, "o/app", now.Add(time.Second))
	fork := e.addHold(other, nil, hold.QueueSecurity, hold.ReasonForkPR)

	// Validation.
	if code, m, _ := e.do("GET", "/api/v1/admin/held-runs", e.owner, ""); code != 400 || m["error"] != "customerId required" {
		t.Fatalf("no customerId: %d %v", code, m)
	}
	if code, m, _ := e.do("GET", "/api/v1/admin/held-runs?customerId=o&status=open", e.owner, ""); code != 400 || !strings.Contains(fmt.Sprint(m["error"]), "pending, all") {
		t.Fatalf("bad status: %d %v", code, m)
	}

	// The auditor reads the queue; the listing is in the access log.
	code, m, _ := e.do("GET", "/api/v1/admin/held-runs?customerId=o", e.auditor, "")
	hs, _ := m["heldRuns"].([]any)
	if code != 200 || len(hs) != 2 {
		t.Fatalf("list: %d %v", code, m)
	}
	byID := func(l []any) map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, x := range l {
			out[x.(map[string]any)["id"].(string)] = x.(map[string]any)
		}
		return out
	}
	h0 := byID(hs)[review.ID]
	for _, k := range []string{"id", "runId", "jobId", "jobName", "holdType", "queueType", "status", "holdScope", "reason", "contexts", "expiresAt", "createdAt", "clauses", "approvals", "resolvedBy", "resolveNote"} {
		if _, ok := h0[k]; !ok {
			t.Errorf("held run lacks %q: %v", k, h0)
		}
	}
	if h0 == nil || h0["jobName"] != "ship" || h0["holdScope"] != "job" || len(h0["clauses"].([]any)) != 2 {
		t.Fatalf("first hold: %v", h0)
	}
	if h1 := byID(hs)[fork.ID]; h1["jobId"] != nil || h1["jobName"] != nil || h1["queueType"] != "security" || h1["reason"] != "fork_pr" {
		t.Fatalf("workflow hold: %v", h1)
	}
	if _, m, _ := e.do("GET", "/api/v1/admin/held-runs?customerId=o&runId="+other.ID, e.owner, ""); len(m["heldRuns"].([]any)) != 1 {
		t.Fatalf("runId filter: %v", m)
	}
	if _, m, _ := e.do("GET", "/api/v1/admin/held-runs?customerId=elsewhere", e.owner, ""); len(m["heldRuns"].([]any)) != 0 {
		t.Fatalf("other org: %v", m)
	}
	log, _ := e.st.ListAccessLog(context.Background(), store.AccessLogFilter{Action: "held_run.list.read"})
	if len(log) != 3 || log[len(log)-1].Role != "auditor" || log[len(log)-1].Resource != "held_runs:o" {
		t.Fatalf("list access rows: %+v", log)
	}

	// Decisions: validation, strict body, unknown hold, directory check.
	dec := "/api/v1/admin/held-runs/decision"
	for body, want := range map[string]int{
		`{"customerId":"o","heldRunId":"` + review.ID + `","decision":"maybe"}`:                      400,
		`{"customerId":"o","heldRunId":"` + review.ID + `","decision":"approve","x":1}`:              400,
		`{"heldRunId":"` + review.ID + `","decision":"approve"}`:                                     400,
		`{"customerId":"o","heldRunId":"nope","decision":"approve"}`:                                 404,
		`{"customerId":"other","heldRunId":"` + review.ID + `","decision":"approve"}`:                404,
		`{"customerId":"o","heldRunId":"` + review.ID + `","decision":"approve","asUserId":"alice"}`: 400,
	} {
		if code, m, _ := e.do("POST", dec, e.owner, body); code != want {
			t.Errorf("%s: %d %v, want %d", body, code, m, want)
		}
	}
	if code, m, _ := e.do("POST", dec, e.auditor, `{"customerId":"o","heldRunId":"`+review.ID+`","decision":"approve"}`); code != 403 {
		t.Fatalf("auditor decision: %d %v", code, m)
	}

	// alice registers; approving as alice satisfies her clause only.
	if code, m, _ := e.do("PATCH", "/api/v1/admin/trust-policy/directory", e.owner,
		`{"customerId":"o","userId":"alice","provider":"github","providerUsername":"alice-gh","providerUserId":"101","ciTrust":"write"}`); code != 200 {
		t.Fatalf("directory-set: %d %v", code, m)
	}
	code, m, _ = e.do("POST", dec, e.owner, `{"customerId":"o","heldRunId":"`+review.ID+`","decision":"approve","asUserId":"alice","reason":"lgtm"}`)
	if code != 200 || m["status"] != "pending" || fmt.Sprint(m["remainingClauses"]) != "[user:bob]" {
		t.Fatalf("approve as alice: %d %v", code, m)
	}
	code, m, _ = e.do("POST", dec, e.owner, `{"customerId":"o","heldRunId":"`+review.ID+`","decision":"approve","asUserId":"alice"}`)
	if code != 409 || m["status"] != "ineligible" || m["error"] == "" {
		t.Fatalf("alice again: %d %v", code, m)
	}
	// Without asUserId the token is the operator: every open clause.
	code, m, _ = e.do("POST", dec, e.owner, `{"customerId":"o","heldRunId":"`+review.ID+`","decision":"approve"}`)
	if code != 200 || m["status"] != "released" {
		t.Fatalf("operator approve: %d %v", code, m)
	}
	code, m, _ = e.do("POST", dec, e.owner, `{"customerId":"o","heldRunId":"`+fork.ID+`","decision":"reject","reason":"unknown contributor"}`)
	if code != 200 || m["status"] != "rejected" {
		t.Fatalf("reject: %d %v", code, m)
	}
	if code, _, _ := e.do("POST", dec, e.owner, `{"customerId":"o","heldRunId":"`+fork.ID+`","decision":"approve"}`); code != 404 {
		t.Fatalf("decision on a resolved hold: %d", code)
	}
	// Pending by default: nothing left; status=all shows the outcome.
	if _, m, _ := e.do("GET", "/api/v1/admin/held-runs?customerId=o", e.owner, ""); len(m["heldRuns"].([]any)) != 0 {
		t.Fatalf("pending after decisions: %v", m)
	}
	_, m, _ = e.do("GET", "/api/v1/admin/held-runs?customerId=o&status=all", e.owner, "")
	all := m["heldRuns"].([]any)
	r0, r1 := byID(all)[review.ID], byID(all)[fork.ID]
	if len(all) != 2 || r0["status"] != "approved" || !strings.HasPrefix(fmt.Sprint(r0["resolvedBy"]), "service:") || len(r0["approvals"].([]any)) != 2 ||
		r1["status"] != "rejected" || r1["resolveNote"] != "unknown contributor" {
		t.Fatalf("status=all: %v", all)
	}
	for _, action := range []string{"held_run.approve", "held_run.reject"} {
		if rows, _ := e.st.ListAccessLog(context.Background(), store.AccessLogFilter{Action: action}); len(rows) == 0 {
			t.Errorf("no %s access row", action)
		}
	}
}

func TestHeldRunRoutesOutsideIndependentMode(t *testing.T) {
	for _, mode := range []config.Mode{config.ModePlatform, config.ModeHybrid, config.ModeObserved} {
		e := newModeEnv(t, mode, true)
		for _, c := range []struct{ method, path, body string }{
			{"GET", "/api/v1/admin/held-runs?customerId=o", ""},
			{"POST", "/api/v1/admin/held-runs/decision", `{"customerId":"o","heldRunId":"x","decision":"approve"}`},
		} {
			code, m, _ := e.do(c.method, c.path, e.owner, c.body)
			msg := fmt.Sprint(m["error"])
			if code != 409 || !strings.Contains(msg, "Platform dashboard") || !strings.Contains(msg, "kici approve") || !strings.Contains(msg, "/kici approve") {
				t.Errorf("%s %s %s: %d %v", mode, c.method, c.path, code, m)
			}
		}
	}
	// Independent mode without a decider: the decision route is unavailable.
	e := newModeEnv(t, config.DefaultMode, false)
	if code, m, _ := e.do("POST", "/api/v1/admin/held-runs/decision", e.owner, `{"customerId":"o","heldRunId":"x","decision":"approve"}`); code != http.StatusServiceUnavailable {
		t.Fatalf("no decider: %d %v", code, m)
	}
	if code, _, _ := e.do("GET", "/api/v1/admin/held-runs?customerId=o", e.owner, ""); code != 200 {
		t.Fatalf("list in independent mode: %d", code)
	}
}

// TestHeldRunGroupField checks that a concurrency hold's group is listed as
// "group", and that other holds list it as null.
func TestHeldRunGroupField(t *testing.T) {
	e := newModeEnv(t, "", true)
	now := time.Now().UTC()
	run, _ := e.addRun("deploy", status.RunHeld, "o/app", now)
	grouped := &store.HeldRun{OrgID: run.OrgID, RunID: run.ID, HoldType: hold.Concurrency, QueueType: hold.QueueContext,
		HoldScope: hold.ScopeWorkflow, Reason: "waiting for a slot of 'deploy'", Group: "deploy", ExpiresAt: now.Add(time.Hour)}
	if ok, err := e.st.CreateHeldRun(context.Background(), grouped, nil); err != nil || !ok {
		t.Fatalf("create hold: %v %v", ok, err)
	}
	plain := e.addHold(run, nil, hold.QueueContext, "review", "alice")
	code, m, _ := e.do("GET", "/api/v1/admin/held-runs?customerId=o", e.owner, "")
	hs, _ := m["heldRuns"].([]any)
	if code != 200 || len(hs) != 2 {
		t.Fatalf("list: %d %v", code, m)
	}
	for _, x := range hs {
		h := x.(map[string]any)
		g, has := h["group"]
		switch h["id"] {
		case grouped.ID:
			if g != "deploy" {
				t.Errorf("concurrency hold group: %v", h)
			}
		case plain.ID:
			if !has || g != nil {
				t.Errorf("reviewer hold group: %v", h)
			}
		default:
			t.Errorf("unexpected hold %v", h)
		}
	}
}
