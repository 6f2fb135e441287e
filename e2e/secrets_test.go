package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

const (
	secretToken = "npm_Zq81xT3vLw0pKd"
	secretCert  = "-----BEGIN TEST KEY-----\nQk9HVVNLRVlMSU5FT05FZm9yVGVzdA\nU0VDT05ETElORW9mVGhlS2V5Rm9yVA\n-----END TEST KEY-----"
)

// secretsWorkflow echoes its secrets every way a careless step might: plain,
// base64, split across two writes with a pause between, and a multi-line
// value line by line. A second step does not declare the secret and must
// not see it. The last step proves the value is the real one without
// printing it.
func secretsWorkflow() string {
	sum := sha256.Sum256([]byte(secretToken))
	return `name: publish
on:
  push:
    branches: [main]
jobs:
  publish:
    contexts: [release]
    steps:
      - name: leaky
        secrets:
          NPM_TOKEN: release:npm_token
          CERT: pg:release:cert
        run: |
          echo "plain: $NPM_TOKEN"
          echo "base64: $(printf %s "$NPM_TOKEN" | base64)"
          echo "echo-base64: $(echo "$NPM_TOKEN" | base64)"
          printf 'split: %s' "$(printf %s "$NPM_TOKEN" | head -c 6)"
          sleep 0.3
          printf '%s end\n' "$(printf %s "$NPM_TOKEN" | tail -c +7)"
          echo "$CERT"
          echo "visible-marker"
      - name: undeclared
        run: echo "token=${NPM_TOKEN:-unset}"
      - name: check
        secrets:
          NPM_TOKEN: release:npm_token
        run: test "$(printf %s "$NPM_TOKEN" | sha256sum | cut -d' ' -f1)" = "` + hex.EncodeToString(sum[:]) + `"
`
}

// adminIn runs kici-admin with stdin.
func (o *orchestrator) adminIn(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "kici-admin"), args...)
	cmd.Env = append(os.Environ(), o.env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kici-admin %v: %v\n%s%s", args, err, out.String(), errb.String())
	}
	return out.String()
}

// leaks returns the forms of the test secrets found in s.
func leaks(s string) []string {
	forms := []string{secretToken, base64.StdEncoding.EncodeToString([]byte(secretToken)),
		base64.StdEncoding.EncodeToString([]byte(secretToken + "\n"))}
	for _, l := range strings.Split(secretCert, "\n") {
		if strings.Contains(l, "TEST KEY") {
			continue
		}
		forms = append(forms, l)
	}
	var found []string
	for _, f := range forms {
		if strings.Contains(s, f) {
			found = append(found, f)
		}
	}
	return found
}

func TestSecretsMaskedInLogsAndSurviveKeyRotation(t *testing.T) {
	keyA := strings.Repeat("a1", 32)
	keyB := strings.Repeat("b2", 32)
	dataDir := t.TempDir()
	o := startIn(t, dataDir, "KICI_SECRET_KEY="+keyA)

	// Secrets reach a job only through a context it names that binds
	// their scope.
	o.admin(t, "context", "create", "--org", "acme", "--name", "release")
	o.admin(t, "context", "bind", "--org", "acme", "--env", "release", "--scope", "release")
	o.adminIn(t, secretToken+"\n", "secret", "set", "--org", "acme", "release", "npm_token", "--from-stdin")
	certFile := filepath.Join(t.TempDir(), "cert.pem")
	write(t, certFile, secretCert)
	o.admin(t, "secret", "set", "--org", "acme", "release", "cert", "--from-file", certFile)
	if out := o.admin(t, "secret", "list", "--org", "acme", "release"); out != "cert\nnpm_token" {
		t.Fatalf("secret list: %q", out)
	}

	repo := repoWithWorkflow(t, secretsWorkflow())
	sourceID, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)

	// Follow the logs live while the run executes.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	follow := exec.CommandContext(ctx, filepath.Join(binDir, "kici-admin"), "runs", "logs", runID, "--follow", "--interval", "100ms")
	follow.Env = append(os.Environ(), o.env...)
	var live bytes.Buffer
	follow.Stdout, follow.Stderr = &live, &live
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	run := o.waitRunStatus(t, runID, 3*time.Minute, "success", "failed", "cancelled")
	_ = follow.Wait()
	if run.Status != "success" {
		t.Fatalf("run %s: %s (%s)", runID, run.Status, run.FailureReason)
	}
	jobs := o.jobsOf(t, runID)
	job := jobs["publish"]
	leaky := o.logText(t, runID, job.JobID, 0)
	if !strings.Contains(leaky, "visible-marker") || !strings.Contains(leaky, "plain: ***") || !strings.Contains(leaky, "split: ***") {
		t.Fatalf("stored log of the leaky step is not the masked output:\n%s", leaky)
	}
	if l := leaks(leaky); len(l) > 0 {
		t.Fatalf("stored log leaks %q:\n%s", l, leaky)
	}
	if !strings.Contains(live.String(), "visible-marker") {
		t.Fatalf("live log did not show the step output:\n%s", live.String())
	}
	if l := leaks(live.String()); len(l) > 0 {
		t.Fatalf("live log leaks %q:\n%s", l, live.String())
	}
	if undeclared := o.logText(t, runID, job.JobID, 1); !strings.Contains(undeclared, "token=unset") {
		t.Fatalf("a step that declares no secret saw one:\n%s", undeclared)
	}
	// Nothing on disk holds the plaintext: not the database, not the logs,
	// not the orchestrator's own log.
	_ = filepath.WalkDir(dataDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(p)
		if l := leaks(string(b)); len(l) > 0 {
			t.Errorf("%s holds %q", p, l)
		}
		return nil
	})
	if out := o.admin(t, "access-log", "list", "--action", "secret.resolve"); !strings.Contains(out, "secret:acme:release:npm_token") {
		t.Errorf("secret reads not in the access log:\n%s", out)
	}
	o.stop(t)

	// The wrong key: the orchestrator refuses to start and says why (3 sealed
	// values: the two secrets and the embedded provenance issuer's signing key).
	cmd := exec.Command(filepath.Join(binDir, "kici-orchestrator"))
	cmd.Env = append(cleanEnv(), "KICI_DATA_DIR="+dataDir, "KICI_PORT=0", "KICI_SECRET_KEY="+keyB)
	out, err := runWithTimeout(cmd, 30*time.Second)
	if err == nil || !strings.Contains(out, "refusing to start") || !strings.Contains(out, "does not decrypt 3 of 3") || !strings.Contains(out, "KICI_SECRET_KEY_OLD") {
		t.Fatalf("start with the wrong key: err=%v\n%s", err, out)
	}

	// Rotation: new key current, old key as KICI_SECRET_KEY_OLD, rotate-key,
	// then the new key alone serves the secrets.
	o = startIn(t, dataDir, "KICI_SECRET_KEY="+keyB, "KICI_SECRET_KEY_OLD="+keyA)
	if out := o.admin(t, "secret", "rotate-key"); !strings.Contains(out, "re-encrypted 2 secret(s)") {
		t.Fatalf("rotate-key: %s", out)
	}
	o.stop(t)
	o = startIn(t, dataDir, "KICI_SECRET_KEY="+keyB)
	write(t, filepath.Join(repo, "again.txt"), "again\n")
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-qm", "again")
	_, delivery = o.push(t, repo, sourceID)
	runID = o.runOf(t, delivery)
	if run := o.waitRunStatus(t, runID, 3*time.Minute, "success", "failed", "cancelled"); run.Status != "success" {
		t.Fatalf("run after rotation: %s (%s)", run.Status, run.FailureReason)
	}
}

// runWithTimeout runs cmd and returns its combined output.
func runWithTimeout(cmd *exec.Cmd, d time.Duration) (string, error) {
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return b.String(), err
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done
		return b.String(), context.DeadlineExceeded
	}
}

// A static agent token minted with kici-admin connects a real agent;
// revoking the token closes the live connection at once and the agent exits
// instead of reconnecting.
func TestRevokedAgentTokenDisconnectsTheAgent(t *testing.T) {
	o := startOrchestrator(t)
	out := o.admin(t, "agent", "register")
	var id, tok string
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "id:"); ok {
			id = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(l, "token:"); ok {
			tok = strings.TrimSpace(v)
		}
	}
	if id == "" || !strings.HasPrefix(tok, "kat_") {
		t.Fatalf("agent register:\n%s", out)
	}
	agentID := "static-e2e-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	agent := exec.Command(filepath.Join(binDir, "kici-agent"))
	agent.Env = append(cleanEnv(), "KICI_ORCHESTRATOR_URL=ws://"+strings.TrimPrefix(o.url, "http://")+"/ws",
		"KICI_AGENT_TOKEN="+tok, "KICI_AGENT_ID="+agentID, "KICI_LABELS=e2e-static", "KICI_WORK_DIR="+stepDir(t, 0o711))
	var agentOut bytes.Buffer
	agent.Stdout, agent.Stderr = &agentOut, &agentOut
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- agent.Wait() }()
	t.Cleanup(func() {
		if agent.ProcessState == nil {
			_ = agent.Process.Kill()
		}
	})
	wait.For(t, 30*time.Second, "agent registered", func() bool {
		b, _ := os.ReadFile(o.logPath)
		return bytes.Contains(b, []byte("agent registered")) && bytes.Contains(b, []byte(agentID))
	})
	start := time.Now()
	if out := o.admin(t, "agent", "revoke", id); !strings.Contains(out, "1 connection(s) closed") {
		t.Fatalf("agent revoke: %s", out)
	}
	select {
	case err := <-exited:
		if err == nil || !strings.Contains(agentOut.String(), "not reconnecting") {
			t.Fatalf("agent exit: %v\n%s", err, agentOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("agent still running 10s after its token was revoked:\n%s", agentOut.String())
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("agent took %s to go", el)
	}
}
