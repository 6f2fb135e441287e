package ingest

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/approval"
	"kici.dev/kici/internal/lockfetch"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trustpolicy"
)

// forkPRPayload is a pull request whose head lives in the fork fork/api.
func forkPRPayload(author string) []byte {
	var m map[string]any
	_ = json.Unmarshal(prPayload(author), &m)
	m["pull_request"].(map[string]any)["head"].(map[string]any)["repo"] = map[string]any{"full_name": "fork/api"}
	b, _ := json.Marshal(m)
	return b
}

func commentPayload(body string, userID int64, login string) []byte {
	b, _ := json.Marshal(map[string]any{"action": "created", "installation": map[string]any{"id": 9},
		"issue":      map[string]any{"number": 5, "pull_request": map[string]any{"url": "x"}},
		"comment":    map[string]any{"body": body, "user": map[string]any{"login": login, "id": userID}},
		"repository": map[string]any{"full_name": ghRepo, "default_branch": "main", "clone_url": "https://github.com/acme/api.git"},
		"sender":     map[string]any{"login": login, "id": userID}})
	return b
}

// forkHarness is a GitHub harness whose tracker runs the real dispatch
// gate and whose processor takes /kici comments; forkIgnored (may be nil)
// counts fork pull requests dropped by policy.
func forkHarness(t *testing.T, forkIgnored func()) *ghHarness {
	h := newGHHarnessWith(t, func(h *ghHarness) (runs.TrackerDeps, ProcessorDeps) {
		st := h.st
		gate := approval.NewGate(st, func(ctx context.Context, org string) (store.TrustPolicy, error) {
			p, _, err := trustpolicy.Effective(ctx, st, org)
			return p, err
		}, nil)
		return runs.TrackerDeps{Gate: gate}, ProcessorDeps{Decider: approval.NewDecider(st, nil).Decide, ForkIgnored: forkIgnored}
	})
	pr := `[{"_type":"pr","events":["opened"]}]`
	h.fake.SetFile(ghRepo, shaHead, lockfetch.LockPath, lockJSON(wfJSON("from-head", pr)))
	h.fake.SetFile(ghRepo, shaMain, lockfetch.LockPath, lockJSON(wfJSON("from-base", pr)))
	h.fake.SetBranch(ghRepo, "main", shaMain)
	h.fake.SetPermission(ghRepo, "maintainer", "write")
	return h
}

// Under the default policy (hold) a fork's pull request — even one opened
// by a collaborator with write access — runs the base branch's lock, with
// trust tier unknown, and waits for approval as a whole.
func TestForkPullRequestHeldWithBaseLock(t *testing.T) {
	h := forkHarness(t, nil)
	id := h.post("pull_request", "fork-1", forkPRPayload("maintainer"))
	d, tr, _ := h.process(id)
	runs := h.runs(id)
	if d.Status != store.DeliveryProcessed || len(runs) != 1 || runs["from-base"] == nil {
		t.Fatalf("delivery %s (%s), runs %v: want one run of the base lock", d.Status, d.Error, runs)
	}
	if !strings.Contains(tr.Summary, "fork") || !strings.Contains(tr.Summary, "base branch main") {
		t.Fatalf("summary %q does not explain the fork's base lock", tr.Summary)
	}
	r := runs["from-base"]
	if r.TrustTier != store.TrustUnknown || r.LockFileSource != "base" || r.TriggerType != apitypes.TriggerPullRequest || r.TargetBranch != "main" || r.SHA != shaHead {
		t.Fatalf("run facts %+v", r)
	}
	if got, _ := h.st.GetRun(h.ctx, r.ID); got.Status != status.RunHeld {
		t.Fatalf("run %s, want held", got.Status)
	}
	holds, _ := h.st.ListHeldRuns(h.ctx, store.HeldRunFilter{RunID: r.ID, Statuses: []hold.Status{hold.Pending}})
	if len(holds) != 1 || holds[0].Reason != hold.ReasonForkPR || holds[0].QueueType != hold.QueueSecurity {
		t.Fatalf("holds %+v", holds)
	}
}

func TestForkPullRequestIgnoredByPolicy(t *testing.T) {
	ignored := 0
	h := forkHarness(t, func() { ignored++ })
	if _, err := h.st.UpdateTrustPolicyAudited(h.ctx, "acme", trustpolicy.Default("acme"), func(p *store.TrustPolicy) error {
		p.ForkPolicy = store.ForkIgnore
		return nil
	}, &store.AccessLogEntry{Action: "trust_policy.updated"}); err != nil {
		t.Fatal(err)
	}
	id := h.post("pull_request", "fork-2", forkPRPayload("outsider"))
	d, tr, _ := h.process(id)
	if d.Status != store.DeliveryProcessed || len(h.runs(id)) != 0 || !strings.Contains(tr.Summary, `fork policy is "ignore"`) || ignored != 1 {
		t.Fatalf("delivery %s, runs %d, summary %q, counted %d", d.Status, len(h.runs(id)), tr.Summary, ignored)
	}
}

// `/kici approve <runId>` works only for a directory member with CI trust
// write or admin, identified by the immutable GitHub user id.
func TestKiciApproveComment(t *testing.T) {
	h := forkHarness(t, nil)
	id := h.post("pull_request", "fork-3", forkPRPayload("outsider"))
	h.process(id)
	run := h.runs(id)["from-base"]
	for _, m := range []*store.DirectoryMember{
		{OrgID: "acme", UserID: "u-maint", Provider: "github", ProviderUserID: "4242", ProviderUsername: "maintainer", CITrust: store.CITrustWrite},
		{OrgID: "acme", UserID: "u-read", Provider: "github", ProviderUserID: "5151", ProviderUsername: "reader", CITrust: store.CITrustRead},
	} {
		if err := h.st.PutDirectoryMemberAudited(h.ctx, m, &store.AccessLogEntry{Action: "trust_directory.updated"}); err != nil {
			t.Fatal(err)
		}
	}
	pending := func() int {
		hs, _ := h.st.ListHeldRuns(h.ctx, store.HeldRunFilter{RunID: run.ID, Statuses: []hold.Status{hold.Pending}})
		return len(hs)
	}
	for _, c := range []struct {
		name   string
		userID int64
		login  string
		want   string
	}{
		{"stranger", 999, "maintainer", "not in the approval directory"}, // same login, other id
		{"reader", 5151, "reader", `CI trust is "read"`},
	} {
		_, tr, _ := h.process(h.post("issue_comment", "c-"+c.name, commentPayload("/kici approve "+run.ID, c.userID, c.login)))
		if !strings.Contains(tr.Summary, "refused") || !strings.Contains(tr.Summary, c.want) || pending() != 1 {
			t.Fatalf("%s: summary %q, pending holds %d", c.name, tr.Summary, pending())
		}
	}
	_, tr, _ := h.process(h.post("issue_comment", "c-ok", commentPayload("/kici approve "+run.ID+"\nthanks!", 4242, "maintainer")))
	if !strings.Contains(tr.Summary, "hold released") || pending() != 0 {
		t.Fatalf("summary %q, pending holds %d", tr.Summary, pending())
	}
	log, _ := h.st.ListAccessLog(h.ctx, store.AccessLogFilter{Action: "held_run.approve"})
	if len(log) != 1 || log[0].TokenLabel != "github:maintainer" {
		t.Fatalf("access log %+v", log)
	}
}

// A push to the default branch does not register a workflow whose job
// names contexts that can never pass together; the others register and
// the trace says why.
func TestRegistrationRefusesUnsatisfiableContexts(t *testing.T) {
	h := newGHHarness(t)
	for _, c := range []*store.Context{
		{OrgID: "acme", Name: "off", Type: store.ContextTypeFixed, Enabled: false},
		{OrgID: "acme", Name: "main-only", Type: store.ContextTypeFixed, Enabled: true, BranchRestrictions: []string{"main"}},
		{OrgID: "acme", Name: "prod-only", Type: store.ContextTypeFixed, Enabled: true, BranchRestrictions: []string{"prod"}},
		{OrgID: "acme", Name: "globby", Type: store.ContextTypeFixed, Enabled: true, BranchRestrictions: []string{"release/*"}},
	} {
		if _, err := h.st.UpsertContext(h.ctx, c, nil); err != nil {
			t.Fatal(err)
		}
	}
	withContexts := func(name, contexts string) string {
		return strings.Replace(wfJSON(name, `[{"_type":"kici_event","eventName":"deploy"}]`), `"needs":[]`, `"needs":[],"contexts":`+contexts, 1)
	}
	lock := lockJSON(
		withContexts("disabled", `["off"]`),
		withContexts("disjoint", `["main-only","prod-only"]`),
		withContexts("glob-left-to-dispatch", `["main-only","globby"]`),
		withContexts("unknown-name", `["nope"]`),
		wfJSON("plain", `[{"_type":"kici_event","eventName":"deploy"}]`),
	)
	h.fake.SetFile(ghRepo, shaMain, lockfetch.LockPath, lock)
	h.fake.SetCompare(ghRepo, shaPrev, shaMain, nil)
	_, tr, _ := h.process(h.post("push", "reg-1", pushPayload("refs/heads/main", shaPrev, shaMain)))
	regs, err := h.st.ListRegistrations(h.ctx, store.RegistrationFilter{RepoIdentifier: ghRepo})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range regs {
		names = append(names, r.WorkflowName)
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "glob-left-to-dispatch,plain,unknown-name" {
		t.Fatalf("registered %v", names)
	}
	errs := strings.Join(tr.Errors, "\n")
	if !strings.Contains(errs, `workflow "disabled" not registered`) || !strings.Contains(errs, "'off' is disabled") ||
		!strings.Contains(errs, `workflow "disjoint" not registered`) {
		t.Fatalf("trace errors:\n%s", errs)
	}
}
