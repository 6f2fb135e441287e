package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/testutil/forgefake"
	"kici.dev/kici/internal/testutil/wait"
)

// forgeRepo is a pipeline repository served as acme/api by a universal-git
// source of preset gitea or gitlab-repo. With Gitea it is a real Gitea
// (startGitea): the repository is pushed to it over HTTP, its own webhooks
// reach kici, and the commit statuses are read back through its API. With
// GitLab, git is read over file://, the API is the recording fake, and
// pushes are delivered as GitLab's webhooks by the test.
type forgeRepo struct {
	o        *orchestrator
	kind     string            // forgefake.Gitea or forgefake.GitLab
	fake     *forgefake.Server // GitLab
	gitea    *giteaServer      // Gitea
	sourceID string
	secret   string
	seen     map[string]bool // Gitea deliveries push has already returned
}

// forgePreset is the source preset, signature scheme and header of each kind.
var forgePreset = map[string]struct{ preset, verification, header string }{
	forgefake.Gitea:  {"gitea", "hmac_sha256", "X-Gitea-Signature"},
	forgefake.GitLab: {"gitlab-repo", "bearer_token", "X-Gitlab-Token"},
}

func newForgeRepo(t *testing.T, o *orchestrator, kind, repo string) *forgeRepo {
	t.Helper()
	if kind == forgefake.Gitea {
		return newGiteaRepo(t, o)
	}
	return newFakeForgeRepo(t, o, kind, "file://"+forgeGitRoot(t, repo)+"/{repo}")
}

// forgeGitRoot is a directory holding repo as acme/api, the way a forge
// lays out its repositories.
func forgeGitRoot(t *testing.T, repo string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "acme"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(repo, filepath.Join(root, "acme", "api")); err != nil {
		t.Fatal(err)
	}
	return root
}

// newFakeForgeRepo registers a source of kind whose API is the recording
// fake and whose git is read at gitURLTemplate ({repo} is acme/api).
func newFakeForgeRepo(t *testing.T, o *orchestrator, kind, gitURLTemplate string) *forgeRepo {
	t.Helper()
	f := &forgeRepo{o: o, kind: kind, fake: forgefake.New(kind, "corpus-forge-token")}
	t.Cleanup(f.fake.Close)
	p := forgePreset[kind]
	req, _ := json.Marshal(map[string]any{"orgId": "acme", "name": p.preset, "verificationMethod": p.verification,
		"verificationConfig": map[string]any{"header": p.header},
		"gitConfig": map[string]any{"preset": p.preset, "gitUrlTemplate": gitURLTemplate, "apiBaseUrl": f.fake.URL,
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
	f.secret = f.webhookSecret(t)
	return f
}

// newGiteaRepo starts a real Gitea holding the empty repository acme/api,
// registers it with kici the way docs/ingress.md tells an operator to
// (kici-admin source add gitea, then a Gitea webhook with the printed URL
// and secret), and returns the forge the pipeline pushes to.
func newGiteaRepo(t *testing.T, o *orchestrator) *forgeRepo {
	t.Helper()
	g := startGitea(t)
	g.createRepo(t, "acme", "api")
	f := &forgeRepo{o: o, kind: forgefake.Gitea, gitea: g, seen: map[string]bool{}}
	f.sourceID = o.admin(t, "source", "add", "gitea", "--org", "acme", "--name", "gitea", "--url", g.URL, "--forge-token", g.Token, "--quiet")
	f.secret = f.webhookSecret(t)
	var src struct {
		Source struct {
			WebhookPath string `json:"webhookPath"`
		} `json:"source"`
	}
	o.get(t, "/api/v1/admin/generic-sources/"+f.sourceID, &src)
	g.addWebhook(t, "acme/api", o.url+src.Source.WebhookPath, f.secret)
	return f
}

// webhookSecret reads the source's generated webhook secret.
func (f *forgeRepo) webhookSecret(t *testing.T) string {
	t.Helper()
	var sec struct {
		WebhookSecret string `json:"webhookSecret"`
	}
	f.o.get(t, "/api/v1/admin/generic-sources/"+f.sourceID+"/webhook-secret", &sec)
	return sec.WebhookSecret
}

// push delivers a push of the repository's HEAD to main (before: its
// parent) and returns the delivery id: to Gitea with git, whose webhook
// then reaches kici; to GitLab as the forge's webhook.
func (f *forgeRepo) push(t *testing.T, repo string) string {
	t.Helper()
	if f.gitea != nil {
		f.gitea.push(t, repo, "acme/api", "main")
		return f.nextDelivery(t)
	}
	after := git(t, repo, "rev-parse", "HEAD")
	before := zeroSHAOr(git(t, repo, "rev-list", "--max-count=1", "--skip=1", "HEAD"))
	p := forgePreset[f.kind]
	body := fmt.Appendf(nil, `{"object_kind":"push","ref":"refs/heads/main","before":%q,"after":%q,`+
		`"user_username":"dev","user_id":5,"project":{"path_with_namespace":"acme/api","default_branch":"main"}}`, before, after)
	return (&universalForge{o: f.o}).post(t, p.preset, map[string]string{"X-Gitlab-Event": "Push Hook", p.header: f.secret,
		"X-Gitlab-Event-UUID": uuid.NewString(), "X-Gitlab-Instance": "https://gitlab.example.com"}, body)
}

// nextDelivery waits for a push delivery of the Gitea source that push has
// not returned yet: the one Gitea's webhook just made.
func (f *forgeRepo) nextDelivery(t *testing.T) string {
	t.Helper()
	var id string
	arrived := func() bool {
		var page struct {
			Deliveries []struct {
				DeliveryID string `json:"deliveryId"`
				SourceID   string `json:"sourceId"`
			} `json:"deliveries"`
		}
		f.o.get(t, "/api/v1/admin/event-log?orgId=acme&event=push&limit=50", &page)
		for _, d := range page.Deliveries {
			if d.SourceID == f.sourceID && !f.seen[d.DeliveryID] {
				id = d.DeliveryID
				f.seen[id] = true
				return true
			}
		}
		return false
	}
	wait.For(t, 30*time.Second, "Gitea's push webhook to reach kici", arrived)
	return id
}

// zeroSHAOr is sha, or 40 zeros for a root commit's missing parent.
func zeroSHAOr(sha string) string {
	if sha == "" {
		return "0000000000000000000000000000000000000000"
	}
	return sha
}

// waitStatuses waits until the last state the forge holds for each
// context (Gitea, read through its API) or name (GitLab, as the fake
// received it) on sha is the wanted one.
func (f *forgeRepo) waitStatuses(t *testing.T, label, sha string, want map[string]string) {
	t.Helper()
	states := func() map[string][]string { return f.gitea.statuses(t, "acme/api", sha) }
	if f.gitea == nil {
		u := &universalForge{o: f.o, fake: f.fake}
		states = func() map[string][]string { return u.statesOf(t, "/api/v4/projects/acme%2Fapi/statuses/"+sha, "name") }
	}
	var got map[string][]string
	last := func() bool {
		got = states()
		for k, state := range want {
			if s := got[k]; len(s) == 0 || s[len(s)-1] != state {
				return false
			}
		}
		return true
	}
	if !wait.Until(30*time.Second, last) {
		t.Errorf("%s: commit statuses received %v, want last states %v", label, got, want)
	}
}
