package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// `runs list` takes --workflow like `runs start` (--workflow-name stays an
// alias; two different values are refused) and --branch.
func TestRunsListWorkflowAndBranchFlags(t *testing.T) {
	h := newHarness(t)
	base := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	onMain, _ := h.addRun(status.RunSuccess, base)
	feature := &store.Run{ID: uuid.NewString(), WorkflowName: "release", Status: status.RunSuccess, Provider: provider.Local, RepoIdentifier: "demo/app",
		RepoURL: "file:///x", Ref: "refs/heads/feature/x", SHA: strings.Repeat("c", 40), OrgID: "demo", DeliveryID: "d-f", CreatedAt: base.Add(time.Minute)}
	if err := h.st.CreateRun(context.Background(), feature, nil); err != nil {
		t.Fatal(err)
	}
	ids := func(args ...string) string {
		return strings.TrimSpace(h.mustRun(append([]string{"runs", "list", "--quiet"}, args...)...))
	}
	if got := ids("--workflow", "ci"); got != onMain.ID {
		t.Errorf("--workflow ci: %q", got)
	}
	if got := ids("--workflow-name", "release"); got != feature.ID {
		t.Errorf("--workflow-name release (alias): %q", got)
	}
	if got := ids("--branch", "feature/x"); got != feature.ID {
		t.Errorf("--branch feature/x: %q", got)
	}
	if got := ids("--branch", "main", "--workflow", "release"); got != "" {
		t.Errorf("--branch main --workflow release: %q", got)
	}
	_, errs, code := h.run("runs", "list", "--workflow", "ci", "--workflow-name", "release")
	if code != 1 || !strings.Contains(errs, "--workflow-name is the old name of --workflow") {
		t.Errorf("disagreeing flags: %d %q", code, errs)
	}
}

// `runs logs --json` prints JSON Lines: one object per log line with its
// job, step, stream and text.
func TestRunsLogsJSON(t *testing.T) {
	h := newHarness(t)
	run, jobs := h.addRun(status.RunSuccess, time.Now().UTC())
	ts := time.Now().UnixMilli()
	if err := h.st.UpsertStep(context.Background(), &store.Step{RunID: run.ID, JobID: jobs[0].ID, StepIndex: 0, StepName: "Checkout", Status: status.StepSuccess}); err != nil {
		t.Fatal(err)
	}
	if err := h.logs.Append(run.ID, jobs[0].ID, -1, []protocol.LogLine{{Timestamp: ts, Stream: protocol.StreamStdout, Text: "cloning"}}); err != nil {
		t.Fatal(err)
	}
	if err := h.logs.Append(run.ID, jobs[0].ID, 0, []protocol.LogLine{{Timestamp: ts, Stream: protocol.StreamStderr, Text: "warn \x1b[31mred\x1b[0m"}}); err != nil {
		t.Fatal(err)
	}

	out := h.mustRun("runs", "logs", run.ID, "--job", "build", "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 JSON lines:\n%s", out)
	}
	var got []logLineJSON
	for _, l := range lines {
		var v logLineJSON
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("not JSON: %q: %v", l, err)
		}
		got = append(got, v)
	}
	want := []logLineJSON{
		{JobID: jobs[0].ID, Job: "build", Step: -1, StepName: "setup", TS: ts, Stream: "stdout", Msg: "cloning"},
		{JobID: jobs[0].ID, Job: "build", Step: 0, StepName: "Checkout", TS: ts, Stream: "stderr", Msg: "warn \x1b[31mred\x1b[0m"},
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
