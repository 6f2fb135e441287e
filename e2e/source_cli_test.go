package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/forgefake"
)

// Gitea and GitLab sources created with `kici-admin source add gitea|gitlab`
// (no curl) take the forge's own signed webhooks, read the lock with git
// and post commit statuses with the forge token.
func TestSourceAddGiteaGitLabByCLI(t *testing.T) {
	repo := repoWithWorkflow(t, "name: ci\non: {push: {branches: [main]}}\njobs:\n  build:\n    steps:\n      - run: echo built\n")
	sha := git(t, repo, "rev-parse", "HEAD")
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "acme"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(repo, filepath.Join(root, "acme", "api")); err != nil {
		t.Fatal(err)
	}
	o := startOrchestrator(t, loopbackSourcesEnv)
	for _, c := range []struct {
		kind, name string
		fake       *forgefake.Server
		statuses   string
		key        string
		headers    func(secret string, body []byte) map[string]string
		body       string
	}{
		{"gitea", "gt", forgefake.New(forgefake.Gitea, "forge-token-s3cr3t"), "/api/v1/repos/acme/api/statuses/" + sha, "context",
			func(secret string, body []byte) map[string]string {
				mac := hmac.New(sha256.New, []byte(secret))
				mac.Write(body)
				return map[string]string{"X-Gitea-Event": "push", "X-Gitea-Delivery": "d-gitea-1", "X-Gitea-Signature": hex.EncodeToString(mac.Sum(nil))}
			},
			`{"ref":"refs/heads/main","before":"0000000000000000000000000000000000000000","after":%q,"repository":{"full_name":"acme/api","default_branch":"main"},"sender":{"login":"dev","id":3}}`},
		{"gitlab", "gl", forgefake.New(forgefake.GitLab, "forge-token-s3cr3t"), "/api/v4/projects/acme%2Fapi/statuses/" + sha, "name",
			func(secret string, _ []byte) map[string]string {
				return map[string]string{"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": secret, "X-Gitlab-Event-UUID": "d-gitlab-1"}
			},
			`{"object_kind":"push","ref":"refs/heads/main","before":"0000000000000000000000000000000000000000","after":%q,"user_username":"dev","user_id":5,"project":{"path_with_namespace":"acme/api","default_branch":"main"}}`},
	} {
		t.Cleanup(c.fake.Close)
		id := strings.TrimSpace(o.admin(t, "-q", "source", "add", c.kind, "--org", "acme", "--name", c.name, "--url", c.fake.URL,
			"--git-url-template", "file://"+root+"/{repo}", "--forge-token", "forge-token-s3cr3t"))
		secret := strings.TrimSpace(o.admin(t, "source", "get-webhook-secret", id))
		u := &universalForge{o: o, fake: c.fake, repo: repo, sha: sha, secret: secret}
		body := fmt.Appendf(nil, c.body, sha)
		runID := o.runOf(t, u.post(t, c.name, c.headers(secret, body), body))
		if r := o.waitRunStatus(t, runID, 90*time.Second, "success", "failed", "cancelled"); r.Status != "success" {
			t.Fatalf("%s run %s", c.kind, r.Status)
		}
		waitStates(t, c.kind+" statuses", func() map[string][]string { return u.statesOf(t, c.statuses, c.key) },
			map[string]string{"kici/ci/build": "success"})
	}
}
