package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"

	"github.com/google/uuid"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlite"
)

// heldRun stores a run of org with one pending job and n job-scoped holds
// on it (each needing the reviewers given) and returns the run and holds.
func heldRun(t *testing.T, st store.Store, org string, reviewers []string, n int) (*store.Run, []*store.HeldRun) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	run := &store.Run{ID: uuid.NewString(), WorkflowName: "deploy", Status: status.RunRunning, Provider: provider.Local, OrgID: org,
		RepoIdentifier: org + "/app", Ref: "refs/heads/main", SHA: strings.Repeat("a", 40), CreatedAt: now}
	var jobs []*store.Job
	for i := 0; i < n; i++ {
		jobs = append(jobs, &store.Job{ID: uuid.NewString(), RunID: run.ID, JobName: "ship" + string(rune('a'+i)), BaseJobName: "ship",
			Status: status.JobPending, Config: json.RawMessage(`{}`), CreatedAt: now})
	}
	if err := st.CreateRun(ctx, run, jobs); err != nil {
		t.Fatal(err)
	}
	var holds []*store.HeldRun
	for _, j := range jobs {
		h := &store.HeldRun{OrgID: org, RunID: run.ID, JobID: j.ID, HoldType: hold.Reviewer, QueueType: hold.QueueContext,
			HoldScope: hold.ScopeJob, Reason: "context 'release' requires approval", Contexts: []string{"release"},
			ExpiresAt: now.Add(time.Hour)}
		for _, r := range reviewers {
			h.Clauses = append(h.Clauses, store.ApprovalClause{Kind: "user", Value: r})
		}
		if ok, err := st.CreateHeldRun(ctx, h, []status.Job{status.JobPending}); err != nil || !ok {
			t.Fatalf("create hold: %v %v", ok, err)
		}
		holds = append(holds, h)
	}
	return run, holds
}

func TestHeldRunCommands(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	one, oneHolds := heldRun(t, h.st, "acme", []string{"alice", "bob"}, 1)
	two, twoHolds := heldRun(t, h.st, "acme", nil, 2)

	if _, errs, code := h.run("held-run", "list"); code == 0 || !strings.Contains(errs, "--org is required") {
		t.Fatalf("list without --org: %d %s", code, errs)
	}
	list := h.mustRun("held-run", "list", "--org", "acme")
	for _, want := range []string{"ID", "WAITING FOR", "alice, bob", "ENDS", oneHolds[0].ID, twoHolds[1].ID, one.ID, "shipa", "reviewer"} {
		if !strings.Contains(list, want) {
			t.Errorf("list lacks %q:\n%s", want, list)
		}
	}
	if out := h.mustRun("held-run", "list", "--customer-id", "acme", "--run", one.ID, "--quiet"); strings.TrimSpace(out) != oneHolds[0].ID {
		t.Fatalf("list --run --quiet: %q", out)
	}

	// A run id with several pending holds is ambiguous: the error lists them.
	_, errs, code := h.run("held-run", "reject", two.ID, "--reason", "no")
	if code == 0 || !strings.Contains(errs, "has 2 pending holds") || !strings.Contains(errs, twoHolds[0].ID) || !strings.Contains(errs, twoHolds[1].ID) {
		t.Fatalf("ambiguous run: %d %s", code, errs)
	}
	if _, errs, code := h.run("held-run", "reject", twoHolds[0].ID); code == 0 || !strings.Contains(errs, "--reason is required") {
		t.Fatalf("reject without reason: %d %s", code, errs)
	}
	if _, errs, code := h.run("held-run", "approve", twoHolds[0].ID); code == 0 || !strings.Contains(errs, "is not a run id") {
		t.Fatalf("hold id without --org: %d %s", code, errs)
	}
	if out := h.mustRun("held-run", "reject", twoHolds[0].ID, "--org", "acme", "--reason", "not this one"); !strings.Contains(out, "rejected") {
		t.Fatalf("reject by hold id: %s", out)
	}
	// Now the run has one pending hold: its id is enough.
	if out := h.mustRun("held-run", "approve", two.ID); !strings.Contains(out, "approved: the held work resumes") {
		t.Fatalf("approve by run id: %s", out)
	}

	// --as names a directory member and satisfies only that member's clause.
	if _, errs, code := h.run("held-run", "approve", one.ID, "--as", "alice"); code == 0 || !strings.Contains(errs, "HTTP 400") || !strings.Contains(errs, "approval directory") {
		t.Fatalf("--as a non-member: %d %s", code, errs)
	}
	h.mustRun("trust-policy", "directory-set", "--org", "acme", "--user", "alice", "--provider-username", "alice-gh", "--provider-user-id", "101", "--ci-trust", "write")
	if out := h.mustRun("held-run", "approve", one.ID, "--as", "alice", "--reason", "lgtm"); !strings.Contains(out, "still waiting for user:bob") {
		t.Fatalf("approve --as alice: %s", out)
	}
	if _, errs, code := h.run("held-run", "approve", one.ID, "--as", "alice"); code == 0 || !strings.Contains(errs, "HTTP 409") {
		t.Fatalf("alice twice: %d %s", code, errs)
	}
	if out := h.mustRun("held-run", "approve", one.ID, "--json"); !strings.Contains(out, `"status": "released"`) {
		t.Fatalf("operator approve --json: %s", out)
	}
	all := h.mustRun("held-run", "list", "--org", "acme", "--all")
	if !strings.Contains(all, "STATUS") || strings.Count(all, "approved") != 2 || !strings.Contains(all, "rejected") || !strings.Contains(all, "service:") {
		t.Fatalf("list --all:\n%s", all)
	}
	if _, errs, _ := h.run("held-run", "list", "--org", "acme"); !strings.Contains(errs, "no pending held runs") {
		t.Fatalf("empty list note: %s", errs)
	}
	got, _ := h.st.GetHeldRun(ctx, oneHolds[0].ID)
	if got.Status != hold.Approved || len(got.Approvals) != 2 || got.Approvals[0].Approver != "alice" || got.Approvals[0].Reason != "lgtm" {
		t.Fatalf("stored hold: %+v", got)
	}
	help := h.mustRun("held-run", "approve", "--help")
	if !strings.Contains(help, "kici-admin held-run approve <held-run-id> --org acme --as alice") || !strings.Contains(help, "--as string") {
		t.Fatalf("approve --help:\n%s", help)
	}
}

func TestTrustPolicyCommands(t *testing.T) {
	h := newHarness(t)
	out := h.mustRun("trust-policy", "show", "--org", "acme")
	if !strings.Contains(out, "hold (kici's default") || !strings.Contains(out, "72h00m (259200 s)") {
		t.Fatalf("show defaults:\n%s", out)
	}
	if _, errs, code := h.run("trust-policy", "set", "--org", "acme"); code == 0 || !strings.Contains(errs, "--fork-policy and/or --approval-expiry") {
		t.Fatalf("set without flags: %d %s", code, errs)
	}
	if _, errs, code := h.run("trust-policy", "set", "--org", "acme", "--approval-expiry", "30s"); code == 0 || !strings.Contains(errs, "at least 1m") {
		t.Fatalf("short expiry: %d %s", code, errs)
	}
	if _, errs, code := h.run("trust-policy", "set", "--org", "acme", "--fork-policy", "open"); code == 0 || !strings.Contains(errs, "HTTP 400") {
		t.Fatalf("bad fork policy: %d %s", code, errs)
	}
	out, errs, code := h.run("trust-policy", "set", "--org", "acme", "--fork-policy", "ignore", "--approval-expiry", "24h")
	if code != 0 || !strings.Contains(out, "fork policy:       ignore\n") || !strings.Contains(out, "86400 s") || !strings.Contains(out, "source:            local") ||
		!strings.Contains(errs, "warning: fork policy \"ignore\"") {
		t.Fatalf("set: %d\n%s\n%s", code, out, errs)
	}
	p, err := h.st.GetTrustPolicy(context.Background(), "acme")
	if err != nil || p.ForkPolicy != "ignore" || p.ApprovalExpirySeconds != 86400 {
		t.Fatalf("stored: %+v %v", p, err)
	}

	if _, errs, _ := h.run("trust-policy", "directory", "--org", "acme"); !strings.Contains(errs, "empty") {
		t.Fatalf("empty directory: %s", errs)
	}
	h.mustRun("trust-policy", "directory-set", "--customer-id", "acme", "--user-id", "alice", "--provider-username", "alice-gh", "--provider-user-id", "101", "--ci-trust", "admin")
	if _, errs, code := h.run("trust-policy", "directory-set", "--org", "acme", "--user", "bob"); code == 0 || !strings.Contains(errs, "--provider-username is required") {
		t.Fatalf("directory-set missing flags: %d %s", code, errs)
	}
	if out := h.mustRun("trust-policy", "directory", "--org", "acme"); !strings.Contains(out, "alice-gh") || !strings.Contains(out, "admin") || !strings.Contains(out, "github") {
		t.Fatalf("directory:\n%s", out)
	}
	if out := h.mustRun("trust-policy", "directory-remove", "--org", "acme", "--user", "alice"); !strings.Contains(out, "alice removed") {
		t.Fatalf("remove: %s", out)
	}
	if out := h.mustRun("trust-policy", "directory-remove", "--org", "acme", "--user", "alice"); !strings.Contains(out, "not a member") {
		t.Fatalf("remove again: %s", out)
	}
	if help := h.mustRun("trust-policy", "--help"); !strings.Contains(help, "hold    the run is created held until approved") || !strings.Contains(help, "kici-admin trust-policy set --org acme") {
		t.Fatalf("help:\n%s", help)
	}
}

func TestContextNewFieldsAndOverrideCommands(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.mustRun("context", "create", "--org", "acme", "--name", "release", "--trigger-types", "push, manual", "--repo-patterns", "acme/*", "--allow-untrusted", "true")
	c, err := h.st.GetContext(ctx, "acme", "release")
	if err != nil || strings.Join(c.TriggerTypeFilters, ",") != "push,manual" || strings.Join(c.RepoPatterns, ",") != "acme/*" || !c.AllowUntrusted {
		t.Fatalf("stored: %+v %v", c, err)
	}
	if _, errs, code := h.run("context", "set-policy", "--org", "acme", "--env", "release", "--trigger-types", "pr"); code == 0 || !strings.Contains(errs, "pull_request") {
		t.Fatalf("pr: %d %s", code, errs)
	}
	h.mustRun("context", "set-policy", "--org", "acme", "--env", "release", "--trigger-types", "", "--allow-untrusted", "false")
	c, _ = h.st.GetContext(ctx, "acme", "release")
	if len(c.TriggerTypeFilters) != 0 || c.AllowUntrusted || len(c.RepoPatterns) != 1 {
		t.Fatalf("after set-policy: %+v", c)
	}
	if show := h.mustRun("context", "show", "--org", "acme", "--name", "release"); !strings.Contains(show, "trigger types:         (any)") || !strings.Contains(show, "repo patterns:         acme/*") {
		t.Fatalf("show:\n%s", show)
	}

	h.mustRun("context", "override", "set", "--org", "acme", "--name", "release", "--routing-key", "generic:acme:1", "REGION", "us")
	if _, errs, code := h.run("context", "override", "set", "--org", "acme", "--name", "release", "REGION", "us"); code == 0 || !strings.Contains(errs, "--routing-key is required") {
		t.Fatalf("set without routing key: %d %s", code, errs)
	}
	if out := h.mustRun("context", "override", "list", "--org", "acme", "--name", "release"); !strings.Contains(out, "generic:acme:1") || !strings.Contains(out, "REGION") || !strings.Contains(out, "us") {
		t.Fatalf("override list:\n%s", out)
	}
	h.mustRun("context", "override", "delete", "--org", "acme", "--env", "release", "--routing-key", "generic:acme:1", "REGION")
	if l, _ := h.st.ListContextSourceOverrides(ctx, "acme", "release", ""); len(l) != 0 {
		t.Fatalf("override not deleted: %v", l)
	}
	if _, errs, code := h.run("context", "override", "delete", "--org", "acme", "--env", "release", "--routing-key", "generic:acme:1", "REGION"); code == 0 || !strings.Contains(errs, "HTTP 404") {
		t.Fatalf("delete missing override: %d %s", code, errs)
	}

	// A context a pending hold waits on cannot be deleted.
	heldRun(t, h.st, "acme", []string{"alice"}, 1)
	if _, errs, code := h.run("context", "delete", "--org", "acme", "--name", "release"); code == 0 || !strings.Contains(errs, "HTTP 409") || !strings.Contains(errs, "pending held run") {
		t.Fatalf("delete with a pending hold: %d %s", code, errs)
	}
}

// Direct mode: held-run decisions and trust-policy changes work on the
// database itself, with the same answers and access-log rows.
func TestHeldRunAndTrustPolicyDirect(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "kici.db")
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	run, holds := heldRun(t, st, "acme", []string{"alice"}, 1)
	env := map[string]string{"KICI_ADMIN_URL": "http://127.0.0.1:1", "KICI_DATABASE_URL": "sqlite://" + path}
	for _, args := range [][]string{
		{"held-run", "list", "--org", "acme"},
		{"held-run", "approve", run.ID, "--reason", "ok"},
		{"trust-policy", "set", "--org", "acme", "--fork-policy", "allow"},
		{"trust-policy", "directory-set", "--org", "acme", "--user", "bob", "--provider-username", "bob", "--provider-user-id", "7", "--ci-trust", "read"},
	} {
		if out, errs, code := runDirect(env, args...); code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out, errs)
		}
	}
	got, _ := st.GetHeldRun(ctx, holds[0].ID)
	if got.Status != hold.Approved || got.ResolvedBy != "service:direct" {
		t.Fatalf("hold after a direct approve: %+v", got)
	}
	if p, err := st.GetTrustPolicy(ctx, "acme"); err != nil || p.ForkPolicy != store.ForkAllow {
		t.Fatalf("policy: %+v %v", p, err)
	}
	// Two listings: the list command and approve resolving the run id.
	for action, n := range map[string]int{"held_run.list.read": 2, "held_run.approve": 1, "trust_policy.updated": 1, "trust_directory.updated": 1} {
		rows, _ := st.ListAccessLog(ctx, store.AccessLogFilter{Action: action})
		if len(rows) != n || rows[0].TokenID != "direct" || !strings.HasPrefix(rows[0].TokenLabel, "direct: ") {
			t.Errorf("%s rows: %+v", action, rows)
		}
	}
}
