package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/testutil/forgefake"
)

// forgeRepo is a pipeline repository served as acme/api by a universal-git
// source of preset gitea or gitlab-repo: git is read over file://, the API
// is the recording fake, and pushes arrive as the forge's own webhooks.
type forgeRepo struct {
	o        *orchestrator
	kind     string // forgefake.Gitea or forgefake.GitLab
	fake     *forgefake.Server
	sourceID string
	secret   string
}

// forgePreset is the source preset, signature scheme and header of each kind.
var forgePreset = map[string]struct{ preset, verification, header string }{
	forgefake.Gitea:  {"gitea", "hmac_sha256", "X-Gitea-Signature"},
	forgefake.GitLab: {"gitlab-repo", "bearer_token", "X-Gitlab-Token"},
}

func newForgeRepo(t *testing.T, o *orchestrator, kind, repo string) *forgeRepo {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "acme"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(repo, filepath.Join(root, "acme", "api")); err != nil {
		t.Fatal(err)
	}
	f := &forgeRepo{o: o, kind: kind, fake: forgefake.New(kind, "corpus-forge-token")}
	t.Cleanup(f.fake.Close)
	p := forgePreset[kind]
	req, _ := json.Marshal(map[string]any{"orgId": "acme", "name": p.preset, "verificationMethod": p.verification,
		"verificationConfig": map[string]any{"header": p.header},
		"gitConfig": map[string]any{"preset": p.preset, "gitUrlTemplate": "file://" + root + "/{repo}", "apiBaseUrl": f.fake.URL,
			"credentialType": "pat", "credential": "corpus-forge-token"}})
	code, body := o.do(t, "POST", "/api/v1/admin/generic-sources", string(req))
	if code != 201 {
		t.Fatalf("create %s source: %d %s", p.preset, code, body)
	}
	var created struct {
		Source struct {
			ID string `json:"id"`
		} `json:"source"`
	}
	_ = json.Unmarshal([]byte(body), &created)
	f.sourceID = created.Source.ID
	var sec struct {
		WebhookSecret string `json:"webhookSecret"`
	}
	o.get(t, "/api/v1/admin/generic-sources/"+f.sourceID+"/webhook-secret", &sec)
	f.secret = sec.WebhookSecret
	return f
}

// push delivers a push of the repository's HEAD to main (before: its
// parent) the way the forge sends it, and returns the delivery id.
func (f *forgeRepo) push(t *testing.T, repo string) string {
	t.Helper()
	after := git(t, repo, "rev-parse", "HEAD")
	before := zeroSHAOr(git(t, repo, "rev-list", "--max-count=1", "--skip=1", "HEAD"))
	p := forgePreset[f.kind]
	id := uuid.NewString()
	if f.kind == forgefake.GitLab {
		body := fmt.Appendf(nil, `{"object_kind":"push","ref":"refs/heads/main","before":%q,"after":%q,`+
			`"user_username":"dev","user_id":5,"project":{"path_with_namespace":"acme/api","default_branch":"main"}}`, before, after)
		return (&universalForge{o: f.o}).post(t, p.preset, map[string]string{"X-Gitlab-Event": "Push Hook", p.header: f.secret,
			"X-Gitlab-Event-UUID": id, "X-Gitlab-Instance": "https://gitlab.example.com"}, body)
	}
	body := fmt.Appendf(nil, `{"ref":"refs/heads/main","before":%q,"after":%q,`+
		`"repository":{"full_name":"acme/api","default_branch":"main"},"pusher":{"login":"dev"},"sender":{"login":"dev","id":3}}`, before, after)
	mac := hmac.New(sha256.New, []byte(f.secret))
	mac.Write(body)
	return (&universalForge{o: f.o}).post(t, p.preset, map[string]string{"X-Gitea-Event": "push", "X-Gitea-Event-Type": "push",
		"X-Gitea-Delivery": id, p.header: hex.EncodeToString(mac.Sum(nil))}, body)
}

// zeroSHAOr is sha, or 40 zeros for a root commit's missing parent.
func zeroSHAOr(sha string) string {
	if sha == "" {
		return "0000000000000000000000000000000000000000"
	}
	return sha
}

// waitStatuses waits until the last state the fake received for each
// context (Gitea) or name (GitLab) on sha is the wanted one.
func (f *forgeRepo) waitStatuses(t *testing.T, label, sha string, want map[string]string) {
	t.Helper()
	prefix, key := "/api/v1/repos/acme/api/statuses/"+sha, "context"
	if f.kind == forgefake.GitLab {
		prefix, key = "/api/v4/projects/acme%2Fapi/statuses/"+sha, "name"
	}
	u := &universalForge{o: f.o, fake: f.fake}
	var got map[string][]string
	last := func() bool {
		got = u.statesOf(t, prefix, key)
		for k, state := range want {
			if s := got[k]; len(s) == 0 || s[len(s)-1] != state {
				return false
			}
		}
		return true
	}
	if !poll(30*time.Second, last) {
		t.Errorf("%s: commit statuses received %v, want last states %v", label, got, want)
	}
}
