package cli

import (
	"strings"
	"testing"

	"kici.dev/kici/internal/auth"
)

func TestTokenAndAgentCommands(t *testing.T) {
	h := newHarness(t)
	// token create prints the plaintext once; it works; revoke makes it 401.
	out := h.mustRun("token", "create", "--label", "reader", "--role", "auditor", "--expires-in", "1h")
	var id, tok string
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "id:"); ok {
			id = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(l, "token:"); ok {
			tok = strings.TrimSpace(v)
		}
	}
	if id == "" || !strings.HasPrefix(tok, auth.AdminTokenPrefix) {
		t.Fatalf("token create output:\n%s", out)
	}
	list := h.mustRun("token", "list")
	if !strings.Contains(list, id) || !strings.Contains(list, "auditor") || strings.Contains(list, tok) {
		t.Fatalf("token list:\n%s", list)
	}
	env := map[string]string{"KICI_ADMIN_URL": h.srv.URL, "KICI_ADMIN_TOKEN": tok}
	if _, errs, code := h.runEnv(env, "token", "list"); code == 0 || !strings.Contains(errs, `does not have permission "token.manage"`) {
		t.Fatalf("auditor listing tokens: exit %d %s", code, errs)
	}
	if _, _, code := h.runEnv(env, "runs", "list"); code != 0 {
		t.Fatalf("auditor reading runs: exit %d", code)
	}
	h.mustRun("token", "revoke", id)
	if _, errs, code := h.runEnv(env, "runs", "list"); code == 0 || !strings.Contains(errs, "Invalid or expired token") {
		t.Fatalf("revoked token: exit %d %s", code, errs)
	}
	if _, errs, code := h.run("token", "create", "--label", "x", "--role", "root"); code == 0 || !strings.Contains(errs, "owner, admin or auditor") {
		t.Fatalf("bad role: exit %d %s", code, errs)
	}

	// agent register / list / revoke.
	out = h.mustRun("agent", "register", "--labels", "linux,gpu")
	if !strings.Contains(out, "token:  kat_") || !strings.Contains(out, "labels: linux,gpu") {
		t.Fatalf("agent register:\n%s", out)
	}
	agentID := strings.TrimSpace(strings.TrimPrefix(strings.Split(out, "\n")[0], "id:"))
	if l := h.mustRun("agent", "list", "--type", "static"); !strings.Contains(l, agentID) || !strings.Contains(l, "linux,gpu") {
		t.Fatalf("agent list:\n%s", l)
	}
	if out := h.mustRun("agent", "revoke", agentID); !strings.Contains(out, "revoked, 0 connection(s) closed") {
		t.Fatalf("agent revoke: %s", out)
	}
	if l := h.mustRun("agent", "list"); strings.Contains(l, agentID) {
		t.Fatalf("revoked token still listed:\n%s", l)
	}
	// The access log shows all of it.
	log := h.mustRun("access-log", "list")
	for _, want := range []string{"token.create", "token.revoke", "agent_token.create", "agent_token.revoke"} {
		if !strings.Contains(log, want) {
			t.Errorf("access log lacks %s:\n%s", want, log)
		}
	}
}

func TestSecretSetNeedsExactlyOneSource(t *testing.T) {
	h := newHarness(t)
	for _, args := range [][]string{
		{"secret", "set", "--org", "acme", "release", "k"},
		{"secret", "set", "--org", "acme", "release", "k", "--from-stdin", "--value", "x"},
	} {
		if _, errs, code := h.run(args...); code == 0 || !strings.Contains(errs, "exactly one of") {
			t.Errorf("%v: exit %d %s", args, code, errs)
		}
	}
	// Without a secret service the server answers 503 and the CLI says so;
	// --value warns that the value is exposed.
	_, errs, code := h.run("secret", "set", "--org", "acme", "release", "k", "--value", "abc")
	if code == 0 || !strings.Contains(errs, "--value leaves the secret") || !strings.Contains(errs, "Secrets are unavailable") {
		t.Fatalf("--value: exit %d %s", code, errs)
	}
}
