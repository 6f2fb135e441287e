package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"kici.dev/kici/internal/cli/direct"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/postgres"
	"kici.dev/kici/internal/store/sqlite"
	"kici.dev/kici/internal/testutil/pgtest"
)

func TestContextAndVariableCommands(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if out := h.mustRun("context", "create", "--org", "acme", "--name", "release", "--required-reviewers", "alice, bob",
		"--branch-restrictions", `["main"]`, "--wait-timer", "60", "--minimum-trust", "trusted"); !strings.Contains(out, "context release created") {
		t.Fatalf("create: %s", out)
	}
	c, err := h.st.GetContext(ctx, "acme", "release")
	if err != nil || len(c.RequiredReviewers) != 2 || c.RequiredReviewers[1] != "bob" || c.BranchRestrictions[0] != "main" ||
		c.WaitTimerSeconds == nil || *c.WaitTimerSeconds != 60 || c.MinimumTrust == nil {
		t.Fatalf("stored: %+v %v", c, err)
	}
	if out := h.mustRun("context", "create", "--org", "acme", "--name", "release", "--required-reviewers", "alice"); !strings.Contains(out, "context release updated") {
		t.Fatalf("upsert: %s", out)
	}
	// An upsert replaces the whole definition: fields not given take their defaults.
	if c, _ = h.st.GetContext(ctx, "acme", "release"); len(c.RequiredReviewers) != 1 || len(c.BranchRestrictions) != 0 || c.WaitTimerSeconds != nil {
		t.Fatalf("after upsert: %+v", c)
	}
	if out := h.mustRun("context", "bind", "--org", "acme", "--env", "release", "--scope", "release/*"); !strings.Contains(out, "bound release to scope release/*") {
		t.Fatalf("bind: %s", out)
	}
	if out := h.mustRun("context", "bind", "--org", "acme", "--env", "release", "--scope", "release/*"); !strings.Contains(out, "already present") {
		t.Fatalf("bind again: %s", out)
	}
	h.mustRun("context", "set-policy", "--org", "acme", "--env", "release", "--required-reviewers", "", "--hold-expiry", "600")
	c, _ = h.st.GetContext(ctx, "acme", "release")
	if c.RequiredReviewers != nil || c.HoldExpirySeconds == nil || *c.HoldExpirySeconds != 600 {
		t.Fatalf("after set-policy: %+v", c)
	}
	if _, errs, code := h.run("context", "set-policy", "--org", "acme", "--env", "release"); code == 0 || !strings.Contains(errs, "at least one policy flag") {
		t.Fatalf("set-policy without flags: %d %s", code, errs)
	}
	if _, errs, code := h.run("context", "set-policy", "--org", "acme", "--env", "nope", "--enabled", "false"); code == 0 || !strings.Contains(errs, "HTTP 404") {
		t.Fatalf("set-policy unknown: %d %s", code, errs)
	}
	if _, errs, code := h.run("context", "create", "--org", "acme", "--name", "g", "--type", "glob"); code == 0 || !strings.Contains(errs, "--glob-pattern is required") {
		t.Fatalf("glob without pattern: %d %s", code, errs)
	}
	if out := h.mustRun("context", "create", "--org", "acme", "--name", "staging", "--type", "template", "--variables", `{"REGION":"eu"}`); !strings.Contains(out, "1 variable(s) set") {
		t.Fatalf("template: %s", out)
	}

	h.mustRun("variable", "set", "acme", "release", "TOKEN_URL", "https://x.example", "--locked")
	if out := h.mustRun("variable", "list", "acme", "release"); !strings.Contains(out, "TOKEN_URL") || strings.Contains(out, "https://x.example") {
		t.Fatalf("variable list without --values: %s", out)
	}
	if out := h.mustRun("variable", "list", "acme", "release", "--values"); !strings.Contains(out, "https://x.example") || !strings.Contains(out, "true") {
		t.Fatalf("variable list --values: %s", out)
	}

	list := h.mustRun("context", "list", "--org", "acme")
	if !strings.Contains(list, "release") || !strings.Contains(list, "staging") || strings.Index(list, "release") > strings.Index(list, "staging") {
		t.Fatalf("list: %s", list)
	}
	if err := h.st.PutSecret(ctx, &store.SealedSecret{OrgID: "acme", Scope: "release/*", Key: "npm_token", Ciphertext: []byte("x")}, nil); err != nil {
		t.Fatal(err)
	}
	if out := h.mustRun("context", "list", "--org", "acme", "--include-secrets"); !strings.Contains(out, "SECRET KEYS") || !strings.Contains(out, "npm_token") {
		t.Fatalf("list --include-secrets: %s", out)
	}
	show := h.mustRun("context", "show", "--org", "acme", "--name", "release")
	for _, want := range []string{"release/*", "TOKEN_URL", "https://x.example", "600s", "(any branch)"} {
		if !strings.Contains(show, want) {
			t.Errorf("show lacks %q:\n%s", want, show)
		}
	}
	if out := h.mustRun("context", "show", "--org", "acme", "--name", "release", "--json"); !strings.Contains(out, `"scopePattern": "release/*"`) && !strings.Contains(out, `"scopePattern":"release/*"`) {
		t.Fatalf("show --json: %s", out)
	}

	h.mustRun("variable", "delete", "acme", "release", "TOKEN_URL")
	if vs, _ := h.st.ListContextVariables(ctx, "acme", "release"); len(vs) != 0 {
		t.Fatalf("variable not deleted: %v", vs)
	}
	if _, errs, code := h.run("variable", "delete", "acme", "release", "TOKEN_URL"); code == 0 || !strings.Contains(errs, "HTTP 404") {
		t.Fatalf("delete missing variable: %d %s", code, errs)
	}
	h.mustRun("context", "delete", "--org", "acme", "--name", "release")
	if _, err := h.st.GetContext(ctx, "acme", "release"); err == nil {
		t.Fatal("context not deleted")
	}
	if _, errs, code := h.run("context", "show", "--org", "acme", "--name", "release"); code == 0 || !strings.Contains(errs, "Context not found") {
		t.Fatalf("show deleted: %d %s", code, errs)
	}
}

func TestContextConcurrencyLimitFlag(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	limit := func() *int64 {
		t.Helper()
		c, err := h.st.GetContext(ctx, "acme", "deploy")
		if err != nil {
			t.Fatal(err)
		}
		return c.ConcurrencyLimit
	}
	h.mustRun("context", "create", "--org", "acme", "--name", "deploy", "--concurrency-limit", "2")
	if l := limit(); l == nil || *l != 2 {
		t.Fatalf("created limit: %v", l)
	}
	if show := h.mustRun("context", "show", "--org", "acme", "--name", "deploy"); !strings.Contains(show, "concurrency limit:     2\n") {
		t.Fatalf("show:\n%s", show)
	}
	// set-policy changes it; other policy flags leave it alone.
	h.mustRun("context", "set-policy", "--org", "acme", "--env", "deploy", "--concurrency-limit", "5")
	h.mustRun("context", "set-policy", "--org", "acme", "--env", "deploy", "--wait-timer", "30")
	if l := limit(); l == nil || *l != 5 {
		t.Fatalf("limit after set-policy: %v", l)
	}
	for _, bad := range []string{"many", "0"} {
		if _, errs, code := h.run("context", "set-policy", "--org", "acme", "--env", "deploy", "--concurrency-limit", bad); code == 0 || !strings.Contains(errs, "oncurrency") {
			t.Fatalf("--concurrency-limit %s: %d %s", bad, code, errs)
		}
	}
	// "" clears.
	h.mustRun("context", "set-policy", "--org", "acme", "--env", "deploy", "--concurrency-limit", "")
	if l := limit(); l != nil {
		t.Fatalf("cleared limit: %d", *l)
	}
	if show := h.mustRun("context", "show", "--org", "acme", "--name", "deploy"); !strings.Contains(show, "concurrency limit:     (none)") {
		t.Fatalf("show without limit:\n%s", show)
	}
}

func TestContextConcurrencyStrategyFlags(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	get := func() *store.Context {
		t.Helper()
		c, err := h.st.GetContext(ctx, "acme", "deploy")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	h.mustRun("context", "create", "--org", "acme", "--name", "deploy", "--concurrency-limit", "1",
		"--concurrency-strategy", "cancel-pending", "--concurrency-timeout", "30m")
	if c := get(); c.ConcurrencyStrategy != store.ConcurrencyCancelPending || c.ConcurrencyTimeoutMs == nil || *c.ConcurrencyTimeoutMs != 1_800_000 {
		t.Fatalf("created: strategy=%q timeout=%v", c.ConcurrencyStrategy, c.ConcurrencyTimeoutMs)
	}
	show := h.mustRun("context", "show", "--org", "acme", "--name", "deploy")
	if !strings.Contains(show, "concurrency strategy:  cancel-pending\n") || !strings.Contains(show, "concurrency timeout:   30m0s\n") {
		t.Fatalf("show:\n%s", show)
	}
	// set-policy changes them; other policy flags leave them alone.
	h.mustRun("context", "set-policy", "--org", "acme", "--env", "deploy", "--concurrency-strategy", "queue", "--concurrency-timeout", "90s")
	h.mustRun("context", "set-policy", "--org", "acme", "--env", "deploy", "--concurrency-limit", "3")
	if c := get(); c.ConcurrencyStrategy != store.ConcurrencyQueue || c.ConcurrencyTimeoutMs == nil || *c.ConcurrencyTimeoutMs != 90_000 {
		t.Fatalf("after set-policy: strategy=%q timeout=%v", c.ConcurrencyStrategy, c.ConcurrencyTimeoutMs)
	}
	for _, bad := range [][]string{
		{"--concurrency-strategy", "cancel"},
		{"--concurrency-timeout", "1800"},  // no unit
		{"--concurrency-timeout", "-5m"},   // not positive
		{"--concurrency-timeout", "500ms"}, // below the API's 1s
		{"--concurrency-timeout", "25h"},   // above the API's 24h
	} {
		args := append([]string{"context", "set-policy", "--org", "acme", "--env", "deploy"}, bad...)
		if _, errs, code := h.run(args...); code == 0 || !strings.Contains(errs, "oncurrency") {
			t.Fatalf("%v: %d %s", bad, code, errs)
		}
	}
	// "" clears: queue and the default timeout.
	h.mustRun("context", "set-policy", "--org", "acme", "--env", "deploy", "--concurrency-strategy", "cancel-pending")
	h.mustRun("context", "set-policy", "--org", "acme", "--env", "deploy", "--concurrency-strategy", "", "--concurrency-timeout", "")
	if c := get(); c.ConcurrencyStrategy != store.ConcurrencyQueue || c.ConcurrencyTimeoutMs != nil {
		t.Fatalf("cleared: strategy=%q timeout=%v", c.ConcurrencyStrategy, c.ConcurrencyTimeoutMs)
	}
	show = h.mustRun("context", "show", "--org", "acme", "--name", "deploy")
	if !strings.Contains(show, "concurrency strategy:  queue\n") || !strings.Contains(show, "concurrency timeout:   30m0s (default)\n") {
		t.Fatalf("show after clearing:\n%s", show)
	}
}

func TestMain(m *testing.M) { pgtest.Main(m) }

// Direct mode: with --database-url / KICI_DATABASE_URL the commands work on
// the database itself, with no orchestrator and no token.
func TestContextCommandsDirectOnDatabase(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
		open func(t *testing.T, u string) store.Store
	}{
		{"sqlite", func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "kici.db") },
			func(t *testing.T, u string) store.Store {
				st, err := sqlite.Open(ctx, strings.TrimPrefix(u, "sqlite://"))
				if err != nil {
					t.Fatal(err)
				}
				return st
			}},
		{"postgres", func(t *testing.T) string { return pgtest.URL(t) },
			func(t *testing.T, u string) store.Store {
				st, err := postgres.Open(ctx, u)
				if err != nil {
					t.Fatal(err)
				}
				return st
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := tc.url(t)
			// The orchestrator creates and migrates the database; kici-admin
			// only works on one at its own schema version.
			tc.open(t, u).Close()
			noServer := map[string]string{"KICI_ADMIN_URL": "http://127.0.0.1:1", "KICI_DATABASE_URL": u}
			run := func(args ...string) string {
				t.Helper()
				out, errs, code := runDirect(noServer, args...)
				if code != 0 {
					t.Fatalf("%v: exit %d: %s", args, code, errs)
				}
				return out
			}
			if out := run("context", "create", "--org", "acme", "--name", "release", "--required-reviewers", "alice"); !strings.Contains(out, "created") {
				t.Fatalf("create: %s", out)
			}
			run("context", "bind", "--org", "acme", "--env", "release", "--scope", "release/*")
			// The flag works as well as the variable.
			out, errs, code := runDirect(map[string]string{"KICI_ADMIN_URL": "http://127.0.0.1:1"}, "variable", "set", "acme", "release", "REGION", "eu", "--database-url", u)
			if code != 0 {
				t.Fatalf("variable set --database-url: %d %s %s", code, out, errs)
			}
			// Same validation as the API.
			if _, errs, code := runDirect(noServer, "context", "set-policy", "--org", "acme", "--env", "nope", "--enabled", "false"); code == 0 || !strings.Contains(errs, "HTTP 404") {
				t.Fatalf("unknown context: %d %s", code, errs)
			}
			if out := run("context", "show", "--org", "acme", "--name", "release"); !strings.Contains(out, "REGION") || !strings.Contains(out, "release/*") || !strings.Contains(out, "alice") {
				t.Fatalf("show: %s", out)
			}

			st := tc.open(t, u)
			defer st.Close()
			vs, err := st.ListContextVariables(ctx, "acme", "release")
			if err != nil || len(vs) != 1 || vs[0].Value != "eu" {
				t.Fatalf("variables in the database: %v %v", vs, err)
			}
			toks, err := st.ListAdminTokens(ctx)
			if err != nil || len(toks) != 0 {
				t.Fatalf("direct mode left admin tokens behind: %v %v", toks, err)
			}
			log, err := st.ListAccessLog(ctx, store.AccessLogFilter{})
			if err != nil || len(log) < 3 || log[0].TokenID != "direct" || !strings.HasPrefix(log[0].TokenLabel, "direct: ") || log[0].Role != "owner" {
				t.Fatalf("access log of direct writes: %v %v", log, err)
			}
			run("context", "delete", "--org", "acme", "--name", "release")
			if _, err := st.GetContext(ctx, "acme", "release"); err == nil {
				t.Fatal("direct delete did not delete")
			}
		})
	}
	if _, errs, code := runDirect(map[string]string{"KICI_DATABASE_URL": "mysql://x"}, "context", "list", "--org", "acme"); code == 0 || !strings.Contains(errs, "postgres://") {
		t.Fatalf("bad URL: %d %s", code, errs)
	}
}

// Run2 runs kici-admin in-process with env and no server of its own.
func runDirect(env map[string]string, args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, IO{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] },
		OpenDatabase: direct.Open})
	return out.String(), errb.String(), code
}
