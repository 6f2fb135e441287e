// Package bench is `make bench`: it starts the real binaries (the embedded
// default on SQLite, and a throwaway PostgreSQL when its server binaries
// are installed), drives them over their public interfaces (signed
// webhooks, the admin API, the agent WebSocket) and prints each figure of
// docs/performance.md as a table, beside its target. Targets are printed,
// never asserted: the figures depend on the machine and its load.
package bench

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/startpages"
)

// orch is one running kici-orchestrator.
type orch struct {
	bin, dataDir, url, token string
	cmd                      *exec.Cmd
	env                      []string
	http                     *http.Client
}

// cleanEnv is the environment without KICI_* variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KICI_") {
			env = append(env, kv)
		}
	}
	return env
}

// startWithSource starts kici-orchestrator on a fresh data directory
// named name under root (startOrch) and adds the benchmark repository as
// its local source "bench"; the caller stops it.
func startWithSource(bin, root, name, repo string, extra ...string) (*orch, *source, error) {
	dir, err := dataDir(root, name)
	if err != nil {
		return nil, nil, err
	}
	o, err := startOrch(bin, dir, extra...)
	if err != nil {
		return nil, nil, err
	}
	src, err := o.addSource(repo, "bench")
	if err != nil {
		o.stop()
		return nil, nil, err
	}
	return o, src, nil
}

// startOrch starts kici-orchestrator from bin on a fresh data directory
// with extra KICI_* settings and waits until it serves.
func startOrch(bin, dir string, extra ...string) (*orch, error) {
	o := &orch{bin: bin, dataDir: dir, http: &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	logf, err := os.Create(filepath.Join(dir, "orchestrator.log"))
	if err != nil {
		return nil, err
	}
	// The agents' work directories live beside the data directory, not in
	// it: the data directory is private to the orchestrator's user.
	o.env = append([]string{"KICI_DATA_DIR=" + dir, "KICI_WORK_DIR=" + dir + "-work"}, extra...)
	o.cmd = exec.Command(filepath.Join(bin, "kici-orchestrator"))
	o.cmd.Env = append(cleanEnv(), append(o.env, "KICI_PORT=0", "TMPDIR="+dir)...)
	o.cmd.Stdout, o.cmd.Stderr = logf, logf
	if err := o.cmd.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && o.url == "" {
		var ep struct {
			URL string `json:"url"`
		}
		if b, err := os.ReadFile(filepath.Join(dir, "orchestrator.json")); err == nil && json.Unmarshal(b, &ep) == nil {
			o.url = ep.URL
		}
		time.Sleep(50 * time.Millisecond)
	}
	tok, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	if o.url == "" || err != nil {
		o.stop()
		return nil, fmt.Errorf("orchestrator did not start (see %s)", filepath.Join(dir, "orchestrator.log"))
	}
	o.token = strings.TrimSpace(string(tok))
	return o, nil
}

func (o *orch) stop() {
	if o.cmd.ProcessState != nil {
		return
	}
	_ = o.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = o.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = o.cmd.Process.Kill()
		<-done
	}
}

// admin runs kici-admin against o and returns its trimmed output.
func (o *orch) admin(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(o.bin, "kici-admin"), args...)
	cmd.Env = append(cleanEnv(), o.env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("kici-admin %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// get decodes an admin API answer into v.
func (o *orch) get(path string, v any) error {
	req, _ := http.NewRequest("GET", o.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+o.token)
	resp, err := o.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// rssKB is the orchestrator's resident set size in KiB.
func (o *orch) rssKB() int {
	total, _ := rssParts(o.cmd.Process.Pid)
	return total
}

// rssParts is a process's VmRSS and its RssAnon (memory of its own, as
// opposed to pages of its binary and other files, which are clean,
// shared between processes mapping the same file and reclaimable), KiB;
// zero when it cannot be read.
func rssParts(pid int) (total, anon int) {
	r, _ := startpages.ResidentOf(pid)
	return r.Total, r.Anon
}

// source is a local source of o with its webhook secret.
type source struct {
	id, org, name, secret, repo string
}

func (o *orch) addSource(repo, name string) (*source, error) {
	// Through the API rather than `kici-admin source add local`, to lift
	// the per-source rate limit (600/min by default) for the burst.
	body, _ := json.Marshal(map[string]any{"orgId": "bench", "name": name, "providerType": "local",
		"localConfig": map[string]string{"path": repo}, "rateLimitRpm": -1})
	req, _ := http.NewRequest("POST", o.url+"/api/v1/admin/generic-sources", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+o.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := o.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var created struct {
		Source struct {
			ID string `json:"id"`
		} `json:"source"`
	}
	if resp.StatusCode/100 != 2 || json.Unmarshal(b, &created) != nil || created.Source.ID == "" {
		return nil, fmt.Errorf("create source: %d %s", resp.StatusCode, b)
	}
	secret, err := o.admin("source", "get-webhook-secret", created.Source.ID)
	if err != nil {
		return nil, err
	}
	return &source{id: created.Source.ID, org: "bench", name: name, secret: secret, repo: repo}, nil
}

// push posts a signed local push delivery for ref at sha and returns the
// delivery id and how long the ingress took to answer.
func (o *orch) push(s *source, ref, before, after string) (string, time.Duration, error) {
	body, _ := json.Marshal(map[string]any{
		"ref": ref, "before": before, "after": after,
		"repository": map[string]string{"full_name": s.org + "/" + s.name, "path": s.repo},
		"sender":     map[string]string{"login": "bench"},
	})
	m := hmac.New(sha256.New, []byte(s.secret))
	m.Write(body)
	raw := uuid.NewString()
	req, _ := http.NewRequest("POST", o.url+"/webhook/"+s.org+"/generic/"+s.name, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Event-Type", "push")
	req.Header.Set("X-Kici-Delivery", raw)
	req.Header.Set("X-Kici-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	start := time.Now()
	resp, err := o.http.Do(req)
	took := time.Since(start)
	if err != nil {
		return "", took, err
	}
	defer resp.Body.Close()
	var ans struct {
		DeliveryID string `json:"deliveryId"`
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return "", took, fmt.Errorf("webhook: %d %s", resp.StatusCode, b)
	}
	_ = json.Unmarshal(b, &ans)
	return ans.DeliveryID, took, nil
}

// runsTotal is how many runs the orchestrator has, in statuses (all when
// empty, a comma list otherwise).
func (o *orch) runsTotal(status string) (int, error) {
	var list struct {
		Total int `json:"total"`
	}
	q := "/api/v1/admin/runs?limit=1"
	if status != "" {
		q += "&status=" + status
	}
	err := o.get(q, &list)
	return list.Total, err
}

// waitRuns waits until at least n runs are in statuses.
func (o *orch) waitRuns(ctx context.Context, status string, n int) error {
	for {
		got, err := o.runsTotal(status)
		if err != nil {
			return err
		}
		if got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d runs %s: %w", got, n, orAny(status), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func orAny(s string) string {
	if s == "" {
		return "created"
	}
	return s
}

// gitRun runs git in dir.
func gitRun(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"}, args...)...)
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}
