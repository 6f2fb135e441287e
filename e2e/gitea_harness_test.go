package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// giteaServer is a real Gitea (the release scripts/gitea.sh builds) run
// for one test on loopback with SQLite, as the unprivileged user nobody
// (Gitea refuses to run as root). Its API, webhooks, git over HTTP and
// commit statuses are Gitea's own.
type giteaServer struct {
	URL      string // web root, e.g. http://127.0.0.1:3123 (API under /api/v1)
	User     string // the site administrator created at start
	Password string
	Token    string // the administrator's API token, every scope
	dir      string
	bin      string
	cmd      *exec.Cmd
}

// nobodyID is the uid and gid Gitea runs as (Debian's nobody/nogroup).
const nobodyID = 65534

// giteaBinary returns the cached Gitea binary, building it first when it
// is missing (make test's deps step builds it before the tests run).
func giteaBinary(t *testing.T) string {
	t.Helper()
	script, err := filepath.Abs("../scripts/gitea.sh")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", script).Output()
	if err != nil {
		t.Fatalf("no Gitea binary: %v; build it with `bash scripts/gitea.sh` (make test does)", err)
	}
	return strings.TrimSpace(string(out))
}

// startGitea starts a fresh Gitea with an administrator and its token;
// it stops with the test.
func startGitea(t *testing.T) *giteaServer {
	t.Helper()
	g := &giteaServer{bin: giteaBinary(t), dir: hostDir(t), User: "kici-admin", Password: "gitea-e2e-Passw0rd"}
	port := freePort(t)
	g.URL = fmt.Sprintf("http://127.0.0.1:%d", port)
	write(t, filepath.Join(g.dir, "app.ini"), fmt.Sprintf(giteaConfig, g.dir, port, g.URL, filepath.Dir(g.bin)))
	for _, d := range []string{"home", "data", "log", "repos"} {
		if err := os.MkdirAll(filepath.Join(g.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := filepath.Walk(g.dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, nobodyID, nobodyID)
	}); err != nil {
		t.Fatal(err)
	}
	// Gitea fills in its generated secrets and creates its tables.
	g.run(t, "migrate")
	g.run(t, "admin", "user", "create", "--admin", "--username", g.User, "--password", g.Password,
		"--email", "admin@gitea.test", "--must-change-password=false")
	g.Token = g.run(t, "admin", "user", "generate-access-token", "--username", g.User, "--token-name", "e2e", "--scopes", "all", "--raw")

	var logs bytes.Buffer
	g.cmd = g.command("web")
	g.cmd.Stdout, g.cmd.Stderr = &logs, &logs
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = g.cmd.Process.Signal(syscall.SIGTERM)
		_, _ = g.cmd.Process.Wait()
		if t.Failed() {
			t.Logf("gitea output:\n%s", logs.String())
		}
	})
	up := func() bool {
		resp, err := http.Get(g.URL + "/api/v1/version")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}
	wait.For(t, time.Minute, "Gitea to serve its API", up)
	return g
}

// giteaConfig is the app.ini: work dir, HTTP port, root URL, and where
// the locales and templates scripts/gitea.sh copied beside the binary are.
// Webhooks may reach loopback (kici listens there); no mail, no SSH, no
// registration.
const giteaConfig = `APP_NAME = kici e2e
RUN_USER = nobody
RUN_MODE = prod
WORK_PATH = %[1]s

[server]
PROTOCOL = http
HTTP_ADDR = 127.0.0.1
HTTP_PORT = %[2]d
ROOT_URL = %[3]s/
DISABLE_SSH = true
START_SSH_SERVER = false
OFFLINE_MODE = true
LFS_START_SERVER = false
APP_DATA_PATH = %[1]s/data
STATIC_ROOT_PATH = %[4]s

[database]
DB_TYPE = sqlite3
PATH = %[1]s/data/gitea.db

[repository]
ROOT = %[1]s/repos
DEFAULT_BRANCH = main

[security]
INSTALL_LOCK = true
ALLOWED_HOST_LIST = loopback

[service]
DISABLE_REGISTRATION = true

[mailer]
ENABLED = false

[webhook]
DELIVER_TIMEOUT = 10

[log]
MODE = console
LEVEL = Warn
ROOT_PATH = %[1]s/log

[cron]
ENABLED = false
`

// command is the gitea binary with args, as nobody, on this server's config.
func (g *giteaServer) command(args ...string) *exec.Cmd {
	cmd := exec.Command(g.bin, append(args, "--config", filepath.Join(g.dir, "app.ini"), "--work-path", g.dir)...)
	cmd.Dir = g.dir
	cmd.Env = []string{"HOME=" + filepath.Join(g.dir, "home"), "USER=nobody", "PATH=/usr/local/bin:/usr/bin:/bin", "GITEA_WORK_DIR=" + g.dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyID, Gid: nobodyID}}
	return cmd
}

// run runs a gitea admin command and returns its trimmed output.
func (g *giteaServer) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := g.command(args...).CombinedOutput()
	if err != nil {
		t.Fatalf("gitea %v: %v\n%s", args, err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// api calls Gitea's REST API as the administrator; body (when not nil) is
// sent as JSON and a 2xx answer decoded into out (when not nil). It
// returns the status code; a non-2xx answer fails the test unless the
// caller expects it (ok lists the codes it accepts besides 2xx).
func (g *giteaServer) api(t *testing.T, method, path string, body, out any, ok ...int) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, g.URL+"/api/v1"+path, rd)
	req.Header.Set("Authorization", "token "+g.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("gitea %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		for _, c := range ok {
			if c == resp.StatusCode {
				return c
			}
		}
		t.Fatalf("gitea %s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("gitea %s %s: %v in %s", method, path, err, raw)
		}
	}
	return resp.StatusCode
}

// createRepo creates the empty repository owner/name, creating the
// organisation owner first when it does not exist.
func (g *giteaServer) createRepo(t *testing.T, owner, name string) {
	t.Helper()
	if g.api(t, "GET", "/orgs/"+owner, nil, nil, 404) == 404 {
		g.api(t, "POST", "/orgs", map[string]any{"username": owner, "visibility": "public"}, nil)
	}
	g.api(t, "POST", "/orgs/"+owner+"/repos", map[string]any{"name": name, "default_branch": "main", "private": false}, nil)
}

// push pushes the local repository's HEAD to branch of owner/name over
// git's smart HTTP, authenticated with the administrator's token.
func (g *giteaServer) push(t *testing.T, local, fullName, branch string) {
	t.Helper()
	u, _ := url.Parse(g.URL + "/" + fullName + ".git")
	u.User = url.UserPassword(g.User, g.Token)
	git(t, local, "push", "-q", "--force", u.String(), "HEAD:refs/heads/"+branch)
}

// addWebhook makes Gitea send owner/name's push and pull-request events
// to target as JSON, signed with secret.
func (g *giteaServer) addWebhook(t *testing.T, fullName, target, secret string) {
	t.Helper()
	g.api(t, "POST", "/repos/"+fullName+"/hooks", map[string]any{"type": "gitea", "active": true, "branch_filter": "*",
		"events": []string{"push", "pull_request"},
		"config": map[string]string{"url": target, "content_type": "json", "secret": secret}}, nil)
}

// giteaStatus is a commit status as Gitea's API shows it.
type giteaStatus struct {
	Context   string `json:"context"`
	Status    string `json:"status"`
	TargetURL string `json:"target_url"`
	ID        int64  `json:"id"`
}

// statuses returns, per context, the states Gitea holds for sha, oldest
// first.
func (g *giteaServer) statuses(t *testing.T, fullName, sha string) map[string][]string {
	t.Helper()
	var list []giteaStatus
	g.api(t, "GET", "/repos/"+fullName+"/statuses/"+sha+"?sort=oldest&limit=50", nil, &list)
	got := map[string][]string{}
	for _, s := range list {
		got[s.Context] = append(got[s.Context], s.Status)
	}
	return got
}
