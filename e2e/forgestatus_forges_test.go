package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/forgefake"
	"kici.dev/kici/internal/testutil/wait"
)

// universalForge is an orchestrator with one universal-git source whose
// repository acme/api is a local git repository (read over file://) and
// whose API is a recording fake.
type universalForge struct {
	o      *orchestrator
	fake   *forgefake.Server
	repo   string
	sha    string
	secret string
}

func newUniversalForge(t *testing.T, kind, preset string, verification string) *universalForge {
	t.Helper()
	return newUniversalForgeWith(t, kind, preset, verification, `name: ci
on: {push: {branches: [main]}}
jobs:
  build:
    steps:
      - run: echo built
  broken:
    steps:
      - name: check
        run: exit 4
`)
}

// newUniversalForgeWith is newUniversalForge whose repository holds workflow.
func newUniversalForgeWith(t *testing.T, kind, preset, verification, workflow string) *universalForge {
	t.Helper()
	u := &universalForge{repo: repoWithWorkflow(t, workflow)}
	u.sha = git(t, u.repo, "rev-parse", "HEAD")
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "acme"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(u.repo, filepath.Join(root, "acme", "api")); err != nil {
		t.Fatal(err)
	}
	u.fake = forgefake.New(kind, "forge-token-s3cr3t")
	t.Cleanup(u.fake.Close)
	u.o = startOrchestrator(t, "KICI_PUBLIC_URL="+forgePublicURL, loopbackSourcesEnv)
	req, _ := json.Marshal(map[string]any{"orgId": "acme", "name": preset, "verificationMethod": verification,
		"verificationConfig": map[string]any{"header": map[string]string{"gitea": "X-Gitea-Signature", "gitlab-repo": "X-Gitlab-Token"}[preset]},
		"gitConfig": map[string]any{"preset": preset, "gitUrlTemplate": "file://" + root + "/{repo}", "apiBaseUrl": u.fake.URL,
			"credentialType": "pat", "credential": "forge-token-s3cr3t"}})
	code, body := u.o.do(t, "POST", "/api/v1/admin/generic-sources", string(req))
	if code != 201 {
		t.Fatalf("create %s source: %d %s", preset, code, body)
	}
	var created struct {
		Source struct {
			ID string `json:"id"`
		} `json:"source"`
	}
	_ = json.Unmarshal([]byte(body), &created)
	var sec struct {
		WebhookSecret string `json:"webhookSecret"`
	}
	u.o.get(t, "/api/v1/admin/generic-sources/"+created.Source.ID+"/webhook-secret", &sec)
	if u.secret = sec.WebhookSecret; u.secret == "" {
		t.Fatalf("no webhook secret for %s", body)
	}
	return u
}

// post delivers body with the forge's own headers (as its documentation
// shows them) and returns the delivery id.
func (u *universalForge) post(t *testing.T, name string, hdr map[string]string, body []byte) string {
	t.Helper()
	req, _ := http.NewRequest("POST", u.o.url+"/webhook/acme/generic/"+name, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		DeliveryID string `json:"deliveryId"`
		Error      string `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&r)
	if resp.StatusCode != 202 {
		t.Fatalf("%s push: %d %s", name, resp.StatusCode, r.Error)
	}
	return r.DeliveryID
}

// pushGitea delivers a push of the repository's HEAD to main, signed as
// Gitea signs (bare hex X-Gitea-Signature), and returns its run id.
func (u *universalForge) pushGitea(t *testing.T, delivery string) string {
	t.Helper()
	body := fmt.Appendf(nil, `{"ref":"refs/heads/main","before":"0000000000000000000000000000000000000000","after":%q,`+
		`"repository":{"full_name":"acme/api","default_branch":"main"},"pusher":{"login":"dev"},"sender":{"login":"dev","id":3}}`, u.sha)
	mac := hmac.New(sha256.New, []byte(u.secret))
	mac.Write(body)
	id := u.post(t, "gitea", map[string]string{"X-Gitea-Event": "push", "X-Gitea-Event-Type": "push",
		"X-Gitea-Delivery": delivery, "X-Gitea-Signature": hex.EncodeToString(mac.Sum(nil))}, body)
	return u.o.runOf(t, id)
}

// pushGitLab delivers a push with GitLab's headers (X-Gitlab-Event: Push
// Hook, the secret in X-Gitlab-Token) and returns its run id.
func (u *universalForge) pushGitLab(t *testing.T, delivery string) string {
	t.Helper()
	body := fmt.Appendf(nil, `{"object_kind":"push","ref":"refs/heads/main","before":"0000000000000000000000000000000000000000","after":%q,`+
		`"user_username":"dev","user_id":5,"project":{"path_with_namespace":"acme/api","default_branch":"main"}}`, u.sha)
	id := u.post(t, "gitlab-repo", map[string]string{"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": u.secret,
		"X-Gitlab-Event-UUID": delivery, "X-Gitlab-Instance": "https://gitlab.example.com"}, body)
	return u.o.runOf(t, id)
}

// statesOf returns the state sequence posted per context (Gitea) or name
// (GitLab), and checks every call was authorized.
func (u *universalForge) statesOf(t *testing.T, prefix, key string) map[string][]string {
	out := map[string][]string{}
	for _, r := range u.fake.Requests(prefix) {
		if !r.Authorized {
			t.Errorf("%s %s without the source's credential", r.Method, r.Path)
		}
		k := fmt.Sprint(r.Body[key])
		out[k] = append(out[k], fmt.Sprint(r.Body["state"]))
		if d := fmt.Sprint(r.Body["description"]); len(d) > 140 {
			t.Errorf("description over 140 characters: %q", d)
		}
	}
	return out
}

func waitStates(t *testing.T, what string, get func() map[string][]string, want map[string]string) map[string][]string {
	t.Helper()
	var got map[string][]string
	wait.For(t, 30*time.Second, what, func() bool {
		got = get()
		for k, last := range want {
			s := got[k]
			if len(s) == 0 || s[len(s)-1] != last {
				return false
			}
		}
		return true
	})
	return got
}

// A Gitea push, signed as Gitea signs (bare hex X-Gitea-Signature): one
// commit status per job on /api/v1/repos/acme/api/statuses/<sha>, pending
// then success or failure, linked to the job; the token never in the log.
func TestForgeStatusGiteaCommitStatuses(t *testing.T) {
	u := newUniversalForge(t, forgefake.Gitea, "gitea", "hmac_sha256")
	runID := u.pushGitea(t, "0b8c7c5e-3f0e-4d6a-9d7e-7c4f1a2b3c4d")
	if r := u.o.waitRunStatus(t, runID, 90*time.Second, "success", "failed", "cancelled"); r.Status != "failed" {
		t.Fatalf("run %s", r.Status)
	}
	prefix := "/api/v1/repos/acme/api/statuses/" + u.sha
	got := waitStates(t, "gitea statuses", func() map[string][]string { return u.statesOf(t, prefix, "context") },
		map[string]string{"kici/ci/build": "success", "kici/ci/broken": "failure"})
	for ctx, states := range got {
		if states[0] != "pending" && len(states) > 1 {
			t.Errorf("%s: %v", ctx, states)
		}
	}
	jobs := u.o.jobsOf(t, runID)
	for _, r := range u.fake.Requests(prefix) {
		name := strings.TrimPrefix(fmt.Sprint(r.Body["context"]), "kici/ci/")
		if want := forgePublicURL + "/ui/runs/" + runID + "/jobs/" + jobs[name].JobID; r.Body["target_url"] != want {
			t.Errorf("target_url %v, want %s", r.Body["target_url"], want)
		}
		if r.Body["state"] == "failure" && !strings.Contains(fmt.Sprint(r.Body["description"]), `step "check" exited with 4`) {
			t.Errorf("failure description %q", r.Body["description"])
		}
	}
	if b, _ := os.ReadFile(u.o.logPath); bytes.Contains(b, []byte("forge-token-s3cr3t")) {
		t.Error("the forge credential appears in the orchestrator log")
	}
}

// A GitLab push with GitLab's headers (X-Gitlab-Event: Push Hook, the
// secret in X-Gitlab-Token): commit statuses on
// /api/v4/projects/acme%2Fapi/statuses/<sha> with GitLab's state words.
func TestForgeStatusGitLabCommitStatuses(t *testing.T) {
	u := newUniversalForge(t, forgefake.GitLab, "gitlab-repo", "bearer_token")
	runID := u.pushGitLab(t, "13792a34-cac6-4fda-95a8-c58e00a39540")
	if r := u.o.waitRunStatus(t, runID, 90*time.Second, "success", "failed", "cancelled"); r.Status != "failed" {
		t.Fatalf("run %s", r.Status)
	}
	waitStates(t, "gitlab statuses", func() map[string][]string {
		return u.statesOf(t, "/api/v4/projects/acme%2Fapi/statuses/"+u.sha, "name")
	}, map[string]string{"kici/ci/build": "success", "kici/ci/broken": "failed"})
	if n := len(u.fake.Requests("/api/v4/projects/acme/")); n != 0 {
		t.Errorf("%d calls with an unescaped project path", n)
	}
}
