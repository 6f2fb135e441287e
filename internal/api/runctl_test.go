package api

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/ingest"
	"kici.dev/kici/internal/runctl"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// stubRunControl answers like runctl.Controller for three run ids.
type stubRunControl struct {
	draining bool
	calls    []string
}

func (s *stubRunControl) CancelRun(_ context.Context, runID string, force bool, by string) (string, error) {
	s.calls = append(s.calls, runID+"/"+by)
	switch runID {
	case "live":
		if force {
			return "cancelled", nil
		}
		return "cancelling", nil
	case "done":
		return "", runctl.ErrRunTerminal
	}
	return "", runctl.ErrRunNotFound
}
func (s *stubRunControl) Drain() runctl.DrainStatus {
	return runctl.DrainStatus{Draining: s.draining, JobsRunning: 2}
}
func (s *stubRunControl) SetDraining(on bool) runctl.DrainStatus {
	s.draining = on
	return s.Drain()
}

func TestCancelAndDrainRoutes(t *testing.T) {
	e := newEnv(t)
	rc := &stubRunControl{}
	// Same store and auth, with run control wired.
	e.srv.Config.Handler = NewRouter(Deps{Store: e.st, Auth: authOf(t, e), RunControl: rc})
	cases := []struct {
		method, path, token, body string
		code                      int
		field, want               string
	}{
		{"POST", "/api/v1/admin/runs/live/cancel", e.owner, "", 200, "status", "cancelling"},
		{"POST", "/api/v1/admin/runs/live/cancel", e.owner, `{"force":true}`, 200, "status", "cancelled"},
		{"POST", "/api/v1/admin/runs/done/cancel", e.owner, "", 409, "error", "Run already finished"},
		{"POST", "/api/v1/admin/runs/nope/cancel", e.owner, "", 404, "error", "Run not found"},
		{"POST", "/api/v1/admin/runs/live/cancel", e.owner, `{"force":"yes"}`, 400, "", ""},
		{"POST", "/api/v1/admin/runs/live/cancel", e.owner, `{"forse":true}`, 400, "", ""},
		{"POST", "/api/v1/admin/runs/live/cancel", e.auditor, "", 403, "", ""},
		{"POST", "/api/v1/admin/orchestrator/drain", e.owner, `{"action":"drain"}`, 200, "draining", "true"},
		{"GET", "/api/v1/admin/orchestrator/drain", e.owner, "", 200, "draining", "true"},
		{"POST", "/api/v1/admin/orchestrator/drain", e.owner, `{"action":"resume"}`, 200, "draining", "false"},
		{"POST", "/api/v1/admin/orchestrator/drain", e.owner, `{"action":"pause"}`, 400, "", ""},
		// Reading the drain state is settings.read (every role); switching
		// it stays orchestrator.drain.
		{"GET", "/api/v1/admin/orchestrator/drain", e.auditor, "", 200, "draining", "false"},
		{"POST", "/api/v1/admin/orchestrator/drain", e.auditor, `{"action":"drain"}`, 403, "", ""},
	}
	for _, c := range cases {
		code, m, _ := e.do(c.method, c.path, c.token, c.body)
		if code != c.code {
			t.Errorf("%s %s %s: %d %v, want %d", c.method, c.path, c.body, code, m, c.code)
			continue
		}
		if c.field != "" {
			if got := fmtAny(m[c.field]); got != c.want {
				t.Errorf("%s %s %s: %s = %q, want %q", c.method, c.path, c.body, c.field, got, c.want)
			}
		}
	}
	if len(rc.calls) == 0 || rc.calls[0] != "live/owner" {
		t.Errorf("cancel by = %v, want the token label", rc.calls)
	}
	if rc.draining {
		t.Error("drain left on after resume")
	}
	// Without run control the routes answer 503, not 404.
	plain := httptest.NewServer(NewRouter(Deps{Store: e.st, Auth: authOf(t, e)}))
	defer plain.Close()
	e.srv.Config.Handler = plain.Config.Handler
	if code, _, _ := e.do("POST", "/api/v1/admin/runs/live/cancel", e.owner, ""); code != 503 {
		t.Errorf("without run control: %d, want 503", code)
	}
}

// authOf is an admin authenticator over the env's store (the env's tokens
// are stored there).
func authOf(t *testing.T, e *env) *auth.AdminAuth {
	t.Helper()
	return auth.NewAdminAuth(e.st, nil)
}

func fmtAny(v any) string { return fmt.Sprint(v) }

type stubRerunner struct{}

func (stubRerunner) Rerun(_ context.Context, runID, by string) (*store.Run, error) {
	switch runID {
	case "done":
		return &store.Run{ID: "new-" + by, WorkflowName: "ci", Status: status.RunPending, SHA: "abc"}, nil
	case "live":
		return nil, ingest.ErrRunNotFinished
	case "gone":
		return nil, fmt.Errorf("%w: its source was removed", ingest.ErrRerunUnavailable)
	}
	return nil, ingest.ErrRunNotFound
}

func TestRerunRoute(t *testing.T) {
	e := newEnv(t)
	e.srv.Config.Handler = NewRouter(Deps{Store: e.st, Auth: authOf(t, e), Rerun: stubRerunner{}})
	code, m, _ := e.do("POST", "/api/v1/admin/runs/done/rerun", e.owner, "")
	run, _ := m["run"].(map[string]any)
	if code != 201 || m["parentRunId"] != "done" || run["runId"] != "new-owner" || run["parentRunId"] != "done" {
		t.Errorf("rerun: %d %v", code, m)
	}
	for path, want := range map[string]int{"live": 409, "gone": 422, "nope": 404} {
		code, m, _ := e.do("POST", "/api/v1/admin/runs/"+path+"/rerun", e.owner, "")
		if code != want {
			t.Errorf("rerun %s: %d %v, want %d", path, code, m, want)
		}
		if path == "gone" && m["error"] != "Run cannot be rerun: its source was removed" {
			t.Errorf("422 message %q", m["error"])
		}
	}
	if code, _, _ := e.do("POST", "/api/v1/admin/runs/done/rerun", e.auditor, ""); code != 403 {
		t.Errorf("auditor rerun: %d, want 403", code)
	}
}

// TestGetRunShowsParentOfRerun: GET /runs/{id} carries parentRunId for a
// rerun and omits it otherwise.
func TestGetRunShowsParentOfRerun(t *testing.T) {
	e := newEnv(t)
	orig, _ := e.addRun("ci", status.RunFailed, "acme/app", time.Now().UTC())
	re, _ := e.addRun("ci", status.RunPending, "acme/app", time.Now().UTC())
	if err := e.st.InsertRunLink(context.Background(), &store.RunLink{RunID: re.ID, ParentRunID: orig.ID, OriginalRunID: orig.ID}); err != nil {
		t.Fatal(err)
	}
	_, m := e.get("/api/v1/admin/runs/" + re.ID)
	if r := m["run"].(map[string]any); r["parentRunId"] != orig.ID {
		t.Errorf("rerun view: %v", r)
	}
	_, m = e.get("/api/v1/admin/runs/" + orig.ID)
	if r := m["run"].(map[string]any); r["parentRunId"] != nil {
		t.Errorf("original run has parentRunId %v", r["parentRunId"])
	}
}
