package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/approval"
	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/ingest"
	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/provenance"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/scaler"
	"kici.dev/kici/internal/secrets"
	"kici.dev/kici/internal/store"
)

// fakeCluster is a node registry of two nodes; this one is "n1".
type fakeCluster struct{ nodes []*store.ClusterNode }

func (f *fakeCluster) Nodes(context.Context) ([]*store.ClusterNode, error) { return f.nodes, nil }
func (f *fakeCluster) Self() string                                        { return "n1" }
func (f *fakeCluster) AliveWithin() time.Duration                          { return 15 * time.Second }
func (f *fakeCluster) Refresh(context.Context)                             {}
func (f *fakeCluster) Leases(context.Context) ([]*store.Lease, error) {
	return []*store.Lease{{Name: "scheduler", Holder: "n1", ExpiresAt: time.Now().Add(time.Minute)}}, nil
}
func (f *fakeCluster) RemoveNode(_ context.Context, id string) error {
	for i, n := range f.nodes {
		if n.ID == id {
			f.nodes = append(f.nodes[:i], f.nodes[i+1:]...)
			return nil
		}
	}
	return store.ErrNotFound
}
func (f *fakeCluster) SetDraining(_ context.Context, node string, on bool) error {
	for _, n := range f.nodes {
		if node == "" || n.ID == node {
			n.Draining = on
		}
	}
	return nil
}

// fakeArtifacts lists one artifact of every run and serves none.
type fakeArtifacts struct{}

func (fakeArtifacts) ListArtifacts(_ context.Context, runID string) ([]*store.Artifact, error) {
	now := time.Now().UTC()
	return []*store.Artifact{{ID: "art-1", OrgID: "acme", RunID: runID, JobID: "job-1", JobName: "build", Name: "dist",
		SizeBytes: 3, SHA256: strings.Repeat("c", 64), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}}, nil
}

func (fakeArtifacts) OpenArtifact(context.Context, string, string) (*store.Artifact, io.ReadCloser, error) {
	return nil, nil, store.ErrNotFound
}

// fakeManualRuns starts every manual run as a pending run.
type fakeManualRuns struct{}

func (fakeManualRuns) StartManualRun(_ context.Context, req ingest.ManualRun) (*store.Run, error) {
	return &store.Run{ID: "manual-1", WorkflowName: req.Workflow, Status: status.RunPending, Provider: provider.Local, OrgID: "acme",
		SHA: strings.Repeat("b", 40), CreatedAt: time.Now().UTC()}, nil
}

// answersEnv is a router with every optional service wired (fakes where
// the real one needs agents, a forge or a cluster), over a real SQLite
// store; single is the same router without a node registry.
type answersEnv struct {
	st     store.Store
	prov   *provenance.Service
	c      *answerChecker
	single string
}

func newAnswersEnv(t *testing.T) *answersEnv {
	t.Helper()
	dir := t.TempDir()
	st, a := openTestStore(t, dir)
	owner := issueToken(t, a, auth.RoleOwner)
	ring := testRing(t)
	prov := provenance.NewService(st, provenance.NewKeys(st, ring.Current), provenance.Config{Issuer: testIssuer, OrchestratorID: "n1"})
	now := time.Now().UTC().Truncate(time.Millisecond)
	nodes := &fakeCluster{nodes: []*store.ClusterNode{{ID: "n1", Address: "http://n1:4000", Version: "test", StartedAt: now, HeartbeatAt: now},
		{ID: "n2", Address: "http://n2:4000", Version: "test", StartedAt: now, HeartbeatAt: now, JobsRunning: 1},
		{ID: "n3", Address: "http://n3:4000", Version: "test", StartedAt: now.Add(-time.Hour), HeartbeatAt: now.Add(-time.Hour)}}}
	scalers := scaler.Status{GlobalMaxAgents: 50, Active: 1, Scalers: []scaler.ScalerStatus{
		{Name: "docker", Type: "docker", State: scaler.ScalerActive, MaxAgents: 4, MaxConcurrentSpawns: 2, Active: 1,
			Agents: []scaler.AgentStatus{{AgentID: "a1", JobID: "j1", RunID: "r1", State: scaler.AgentRunning, CreatedAt: now}}},
		{Name: "fc", Type: "firecracker", Retiring: true, State: scaler.ScalerRetiring, StateReason: "removed by a reload",
			LabelSets: [][]string{{"linux", "kvm"}}, Agents: []scaler.AgentStatus{}},
	}}
	d := Deps{Store: st, Auth: a, Logs: logstore.NewFS(filepath.Join(dir, "logs")), Version: "test",
		Ready:           func(context.Context) error { return nil },
		Secrets:         secrets.New(st, ring),
		ClusterSettings: cluster.NewReader(st, nil, 0, nil),
		RunControl:      &stubRunControl{},
		Rerun:           stubRerunner{},
		ManualRuns:      fakeManualRuns{},
		Artifacts:       fakeArtifacts{},
		Approvals:       approval.NewDecider(st, nil),
		Provenance:      prov,
		Cluster:         nodes,
		ScalerStatus:    func() scaler.Status { return scalers },
		EmitEvent:       func(context.Context, apitypes.EmitRequest) (string, error) { return "kici_event:1", nil },
	}
	srv := newTestServer(t, NewRouter(d))
	d.Cluster = nil
	single := newTestServer(t, NewRouter(d))
	return &answersEnv{st: st, prov: prov, c: newAnswerChecker(t, srv.URL, owner), single: single.URL}
}

// TestOpenAPIResponsesMatchRealAnswers seeds a little of everything and
// calls every route that answers JSON, validating each answer against the
// document's 2XX response schema of its operation.
func TestOpenAPIResponsesMatchRealAnswers(t *testing.T) {
	e := newAnswersEnv(t)
	c := e.c
	run, job := e.seedRun(t)

	c.call("GET", "/health", "")
	c.call("GET", "/ready", "")
	e.sourceAnswers(t)
	e.ingressAnswers(t)
	e.runAnswers(t, run, job)
	e.provenanceAnswers(t, run, job)
	e.tokenAnswers(t)
	e.contextAndSecretAnswers(t)
	e.trustAnswers(t, run)
	e.notificationAnswers(t)

	c.checkShapes()
	if missed := c.unvalidated(); len(missed) > 0 {
		t.Errorf("no answer of these routes was validated: %s", strings.Join(missed, "; "))
	}
	n := 0
	for _, k := range c.validated {
		n += k
	}
	if n < 80 {
		t.Fatalf("only %d answers validated", n)
	}
}

// seedRun stores a running run of org acme with one job and two steps.
func (e *answersEnv) seedRun(t *testing.T) (*store.Run, *store.Job) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	run := &store.Run{ID: "run-1", WorkflowName: "release", Status: status.RunRunning, Provider: provider.Local, RepoIdentifier: "acme/app",
		RepoURL: "file:///x", Ref: "refs/heads/main", SHA: strings.Repeat("a", 40), OrgID: "acme", CreatedAt: now}
	job := &store.Job{ID: "job-1", RunID: run.ID, JobName: "build", BaseJobName: "build", Status: status.JobRunning,
		Config: json.RawMessage(`{}`), RunsOnLabels: []string{"linux"}, CreatedAt: now}
	if err := e.st.CreateRun(ctx, run, []*store.Job{job}); err != nil {
		t.Fatal(err)
	}
	exit := 0
	for _, s := range []*store.Step{
		{RunID: run.ID, JobID: job.ID, StepIndex: 0, StepName: "Checkout", Status: status.StepSuccess, ExitCode: &exit, StartedAt: &now, CompletedAt: &now},
		{RunID: run.ID, JobID: job.ID, StepIndex: 1, StepName: "Build", Status: status.StepRunning, StartedAt: &now},
	} {
		if err := e.st.UpsertStep(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	return run, job
}

func (e *answersEnv) sourceAnswers(t *testing.T) {
	c, p := e.c, apitypes.AdminPrefix
	src := c.call("POST", p+"/generic-sources", `{"orgId":"acme","name":"hooks"}`)
	id := fmt.Sprint(src["source"].(map[string]any)["id"])
	c.call("GET", p+"/generic-sources?orgId=acme", "")
	c.call("GET", p+"/generic-sources/"+id, "")
	c.call("GET", p+"/generic-sources/"+id+"/webhook-secret", "")
	secret := c.call("POST", p+"/generic-sources/"+id+"/webhook-secrets", "")
	c.call("GET", p+"/generic-sources/"+id+"/webhook-secrets", "")
	c.call("DELETE", p+"/generic-sources/"+id+"/webhook-secrets/"+fmt.Sprint(secret["id"]), "")
	c.call("POST", p+"/generic-sources/"+id+"/disable", "")
	c.call("POST", p+"/generic-sources/"+id+"/enable", "")
	c.call("PUT", p+"/generic-sources/"+id+"/org-wide-workflows", `{"orgWideWorkflows":"deny"}`)
	gh := c.call("POST", p+"/sources", `{"provider":"github","orgId":"acme","name":"gh","token":"ghp_test"}`)
	c.call("DELETE", p+"/generic-sources/"+fmt.Sprint(gh["id"]), "")

	if err := e.st.RecordRejected(context.Background(), &store.RejectedDelivery{SourceID: id, OrgID: "acme", Route: "generic",
		StatusCode: 401, Reason: "bad signature", PayloadSizeBytes: 2, ReceivedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	c.call("GET", p+"/rejected-deliveries?sourceId="+id, "")
}

func (e *answersEnv) ingressAnswers(t *testing.T) {
	c, p, ctx := e.c, apitypes.AdminPrefix, context.Background()
	body := []byte(`{"ref":"refs/heads/main"}`)
	for _, id := range []string{"github:77:d0", "github:77:d1"} {
		if err := e.st.AcceptDelivery(ctx, &store.Delivery{ID: id, SourceID: "s", OrgID: "acme", Event: "push", Payload: body},
			&store.EventLogEntry{OrgID: "acme", RoutingKey: "github:77", Event: "push", Source: "direct", Provider: provider.GitHub, PayloadGz: gz(body)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.st.FinishDeliveryOutcome(ctx, "github:77:d0", store.DeliveryProcessed, "", json.RawMessage(`{"summary":"1 of 1 workflows matched"}`),
		store.EventOutcome{Status: store.EventLogProcessed, MatchedCount: 1, RunIDs: []string{"run-1"}}); err != nil {
		t.Fatal(err)
	}
	c.call("GET", p+"/event-log?orgId=acme", "")
	if m := c.call("GET", p+"/event-log/github:77:d0?includePayload=true", ""); m["trace"] == nil || m["errorMessage"] != "" || m["payload"] == nil {
		t.Errorf("event-log detail with trace and payload: %v", m)
	}
	if m := c.call("GET", p+"/event-log/github:77:d1", ""); m["trace"] != nil || m["errorMessage"] != nil {
		t.Errorf("event-log detail of an unprocessed delivery: %v", m)
	}
	c.call("POST", p+"/events/emit", `{"eventName":"deploy","payload":{"env":"prod"}}`)
	regs := []*store.Registration{{OrgID: "acme", RoutingKey: "github:77", WorkflowName: "nightly", TriggerTypes: []string{"schedule"},
		Workflow: json.RawMessage(`{"name":"nightly"}`)}}
	if err := e.st.ReplaceRegistrations(ctx, "s", "acme/api", regs); err != nil {
		t.Fatal(err)
	}
	list := c.call("GET", p+"/registrations?org=acme", "")
	c.call("GET", p+"/registrations/"+fmt.Sprint(list["registrations"].([]any)[0].(map[string]any)["id"]), "")
}

func (e *answersEnv) runAnswers(t *testing.T, run *store.Run, job *store.Job) {
	c, p, ctx := e.c, apitypes.AdminPrefix, context.Background()
	c.call("GET", p+"/runs", "")
	c.call("GET", p+"/runs?count=true", "")
	c.call("GET", p+"/runs?branch=main", "")
	c.call("GET", p+"/runs?count=true&status=running&since=2026-01-02T15:04:05%2B02:00&workflowName=release&repo=acme/app", "")
	c.call("POST", p+"/runs", `{"sourceId":"s","workflow":"ci"}`)
	c.call("GET", p+"/runs/"+run.ID, "")
	c.call("GET", p+"/runs/"+run.ID+"/jobs", "")
	c.call("GET", p+"/runs/"+run.ID+"/jobs?includeSteps=true", "")
	c.call("GET", p+"/runs/"+run.ID+"/jobs/"+job.ID+"/steps/0/logs", "")
	c.call("POST", p+"/runs/live/cancel", `{"force":true}`)
	c.call("POST", p+"/runs/done/rerun", "")

	if err := e.st.UpsertCheckRunDesired(ctx, &store.CheckRun{JobID: job.ID, RunID: run.ID, SourceID: "s", Provider: store.CheckProviderGitHubChecks,
		Repo: "acme/app", SHA: run.SHA, Name: "release / build", DesiredState: "in_progress", DesiredBody: json.RawMessage(`{}`),
		DesiredHash: "h", DesiredAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	c.call("GET", p+"/check-runs?runId="+run.ID, "")
	c.call("GET", p+"/runs/"+run.ID+"/artifacts", "")

	// Drain with a node registry, then on a single node.
	c.call("GET", p+"/orchestrator/drain", "")
	c.call("POST", p+"/orchestrator/drain", `{"action":"drain","node":"n2"}`)
	c.call("GET", p+"/cluster/nodes", "")
	c.call("DELETE", p+"/cluster/nodes/n3", "")
	main := c.base
	c.base = e.single
	if m := c.call("POST", p+"/orchestrator/drain", `{"action":"drain"}`); len(m) != 2 {
		t.Errorf("single-node drain answer: %v, want draining and jobsRunning only", m)
	}
	c.call("GET", p+"/orchestrator/drain", "")
	c.call("GET", p+"/cluster/nodes", "")
	c.base = main

	c.call("GET", p+"/cluster-settings", "")
	c.call("PATCH", p+"/cluster-settings", `{"queueTimeoutMs":60000}`)
	c.call("GET", p+"/scalers", "")
}

func (e *answersEnv) provenanceAnswers(t *testing.T, run *store.Run, job *store.Job) {
	c, p := e.c, apitypes.AdminPrefix
	atts, err := e.prov.Attest(context.Background(), run.ID, job.ID, []provenance.SubjectInput{{Name: "dist", SHA256: strings.Repeat("c", 64)}})
	if err != nil {
		t.Fatal(err)
	}
	c.call("GET", "/.well-known/openid-configuration", "")
	c.call("GET", "/.well-known/jwks.json", "")
	c.call("GET", p+"/runs/"+run.ID+"/attestations", "")
	c.call("GET", p+"/attestations/"+atts[0].ID, "")
	verify := `{"bundle":` + string(atts[0].Bundle) + `,"digest":"sha256:` + strings.Repeat("c", 64) + `"}`
	if v := c.call("POST", "/v1/verify-attestation", verify); v["verified"] != true {
		t.Errorf("verdict: %v", v)
	}
	c.call("POST", "/v1/verify-attestation", `{"bundle":{"mediaType":"x"}}`)
	c.call("POST", p+"/signing-keys/rotate", "")
	c.call("GET", p+"/signing-keys", "")
	c.call("POST", p+"/signing-keys/"+atts[0].Kid+"/revoke", `{"reason":"test"}`)
	c.call("POST", "/v1/verify-attestation", verify)
}

func (e *answersEnv) tokenAnswers(t *testing.T) {
	c, p := e.c, apitypes.AdminPrefix
	tok := c.call("POST", p+"/tokens", `{"label":"ci","role":"admin"}`)
	c.call("GET", p+"/tokens", "")
	c.call("DELETE", p+"/tokens/"+fmt.Sprint(tok["id"]), "")
	if m := c.call("POST", apitypes.AgentTokenPath, `{}`); m["labels"] != nil || m["mandatoryLabels"] != nil {
		t.Errorf("agent token without labels: %v", m)
	}
	agent := c.call("POST", apitypes.AgentTokenPath, `{"labels":["linux"],"mandatoryLabels":["secure"],"expiresAt":"2999-01-01T00:00:00Z"}`)
	c.call("GET", apitypes.AgentTokenPath, "")
	c.call("DELETE", apitypes.AgentTokenPath+"/"+fmt.Sprint(agent["id"]), "")

	now := time.Now().UTC()
	for i, id := range []string{"ws-1", "ws-2"} {
		if err := e.st.CreateWebSession(context.Background(), &store.WebSession{ID: id, CookieHash: fmt.Sprint("h", i), Kind: store.WebSessionPerson,
			Subject: "gitea:alice", Name: "Alice", Role: string(auth.RoleAdmin), CreatedAt: now, LastSeenAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	if m := c.call("GET", p+"/web-sessions?subject=gitea:alice", ""); len(m["sessions"].([]any)) != 2 {
		t.Errorf("alice's web sessions: %v", m)
	}
	c.call("DELETE", p+"/web-sessions/ws-1", "")
	if m := c.call("DELETE", p+"/web-sessions?subject=gitea:alice", ""); m["revoked"] != 1.0 {
		t.Errorf("revoke of alice's sessions: %v, want 1", m)
	}
}

func (e *answersEnv) contextAndSecretAnswers(t *testing.T) {
	c, p := e.c, apitypes.AdminPrefix
	c.call("POST", p+"/secrets/scopes", `{"orgId":"acme","scope":"release"}`)
	c.call("GET", p+"/secrets/scopes?orgId=acme", "")
	c.call("PUT", p+"/secrets/acme/release/NPM_TOKEN", `{"value":"s3cret"}`)
	c.call("GET", p+"/secrets/keys?orgId=acme&scope=release", "")
	if m := c.call("POST", p+"/rotate-key", ""); m["reEncrypted"] != 1.0 || m["reEncryptedSigningKeys"] == 0.0 {
		t.Errorf("rotate-key counts: %v, want the one secret and the signing keys", m)
	}

	c.call("POST", p+"/contexts", `{"orgId":"acme","name":"release"}`)
	c.call("POST", p+"/contexts/templates", `{"orgId":"acme","templateName":"staging","variables":{"REGION":"eu"}}`)
	c.call("POST", p+"/contexts/release/bind", `{"orgId":"acme","scopePattern":"release"}`)
	c.call("PATCH", p+"/contexts/release/policy", `{"orgId":"acme","requiredReviewers":["alice"],"waitTimerSeconds":60}`)
	c.call("PUT", p+"/contexts/release/variables/REGION?orgId=acme", `{"value":"eu","locked":true}`)
	c.call("GET", p+"/contexts/release/variables?orgId=acme", "")
	c.call("PUT", p+"/contexts/release/source-overrides/REGION?orgId=acme&routingKey=github:77", `{"value":"us"}`)
	c.call("GET", p+"/contexts/release/source-overrides?orgId=acme&routingKey=github:77", "")
	c.call("GET", p+"/contexts?orgId=acme", "")
	c.call("GET", p+"/contexts?orgId=acme&includeSecrets=true", "")
	c.call("GET", p+"/contexts/release?orgId=acme", "")
	c.call("DELETE", p+"/contexts/release/source-overrides/REGION?orgId=acme&routingKey=github:77", "")
	c.call("DELETE", p+"/contexts/release/variables/REGION?orgId=acme", "")
	c.call("DELETE", p+"/contexts/staging?orgId=acme", "")

	c.call("DELETE", p+"/secrets/acme/release/NPM_TOKEN", "")
	c.call("DELETE", p+"/secrets/scopes/acme/release", "")
	c.call("GET", p+"/access-log?action=secret.set", "")
}

func (e *answersEnv) trustAnswers(t *testing.T, run *store.Run) {
	c, p := e.c, apitypes.AdminPrefix
	h := &store.HeldRun{OrgID: run.OrgID, RunID: run.ID, HoldType: hold.Reviewer, QueueType: hold.QueueContext,
		HoldScope: hold.ScopeWorkflow, Reason: "context 'release' requires approval from alice", ExpiresAt: time.Now().Add(time.Hour).UTC(),
		Clauses: []store.ApprovalClause{{Kind: "user", Value: "alice"}}}
	if ok, err := e.st.CreateHeldRun(context.Background(), h, []status.Job{status.JobPending}); err != nil || !ok {
		t.Fatalf("create hold: %v %v", ok, err)
	}
	c.call("GET", p+"/held-runs?customerId=acme", "")
	c.call("POST", p+"/held-runs/decision", `{"customerId":"acme","heldRunId":"`+h.ID+`","decision":"approve"}`)
	c.call("GET", p+"/held-runs?customerId=acme&status=all", "")

	c.call("GET", p+"/trust-policy?customerId=acme", "")
	c.call("PATCH", p+"/trust-policy", `{"customerId":"acme","forkPolicy":"hold"}`)
	c.call("GET", p+"/trust-policy/directory?customerId=acme", "")
	c.call("PATCH", p+"/trust-policy/directory", `{"customerId":"acme","userId":"alice","provider":"github","providerUsername":"alice","providerUserId":"1","ciTrust":"write"}`)
	c.call("GET", p+"/trust-policy/directory?customerId=acme", "")
	c.call("DELETE", p+"/trust-policy/directory?customerId=acme&userId=alice", "")
}
