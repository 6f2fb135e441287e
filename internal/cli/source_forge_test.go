package cli

import (
	"context"
	"strings"
	"testing"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/store"
)

// settingsOf returns the stored settings of the org's source name.
func (h *harness) settingsOf(org, name string) *store.SourceSettings {
	h.t.Helper()
	src, err := h.st.GetSourceByName(context.Background(), org, name)
	if err != nil {
		h.t.Fatalf("source %s/%s: %v", org, name, err)
	}
	set, err := h.st.GetSourceSettings(context.Background(), src.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	return set
}

// `source add github`: the admin token is reachable by --token while the
// GitHub token goes by --forge-token; the old form (one --token after the
// subcommand) still works, with the admin token from the environment or as
// the other --token (told apart by its kadm_ prefix); --token values that
// cannot be told apart are refused with the form that works, creating
// nothing, and a lone admin token is never stored as the GitHub token.
func TestSourceAddGitHubTokenFlags(t *testing.T) {
	h := newHarness(t)
	urlOnly := map[string]string{"KICI_ADMIN_URL": h.srv.URL}
	if !strings.HasPrefix(h.token, apitypes.AdminTokenPrefix) || apitypes.AdminTokenPrefix != auth.AdminTokenPrefix {
		t.Fatalf("admin token %q, client prefix %q, server prefix %q", h.token, apitypes.AdminTokenPrefix, auth.AdminTokenPrefix)
	}

	out, errs, code := h.runEnv(urlOnly, "--token", h.token, "source", "add", "github", "--org", "acme", "--name", "gh", "--forge-token", "ghp_new")
	if code != 0 || !strings.Contains(out, `Created github source "gh"`) {
		t.Fatalf("admin --token with --forge-token: exit %d\n%s%s", code, out, errs)
	}
	if got := h.settingsOf("acme", "gh").GitHub.Token; got != "ghp_new" {
		t.Errorf("stored GitHub token %q", got)
	}

	out, errs, code = h.runEnv(map[string]string{"KICI_ADMIN_URL": h.srv.URL, "KICI_ADMIN_TOKEN": h.token, "GH_TOKEN": "ghp_env"},
		"source", "add", "github", "--org", "acme", "--name", "gh-env", "--forge-token-from-env", "GH_TOKEN", "-t", h.token)
	if code != 0 || h.settingsOf("acme", "gh-env").GitHub.Token != "ghp_env" {
		t.Fatalf("--forge-token-from-env with -t: exit %d\n%s%s", code, out, errs)
	}

	out, errs, code = h.run("source", "add", "github", "--org", "acme", "--name", "gh-old", "--token", "ghp_old")
	if code != 0 || !strings.Contains(errs, "write --forge-token") {
		t.Fatalf("old form: exit %d\n%s%s", code, out, errs)
	}
	if got := h.settingsOf("acme", "gh-old").GitHub.Token; got != "ghp_old" {
		t.Errorf("old form stored GitHub token %q", got)
	}

	out, errs, code = h.runEnv(urlOnly, "--token", h.token, "source", "add", "github", "--org", "acme", "--name", "gh-both", "--token", "ghp_both")
	if code != 0 || h.settingsOf("acme", "gh-both").GitHub.Token != "ghp_both" {
		t.Fatalf("admin --token and old --token told apart by prefix: exit %d\n%s%s", code, out, errs)
	}

	for name, args := range map[string][]string{
		"gh-two":   {"--token", "ghp_a", "source", "add", "github", "--org", "acme", "--name", "gh-two", "--token", "ghp_b"},
		"gh-three": {"--token", h.token, "source", "add", "github", "--org", "acme", "--name", "gh-three", "--token", "ghp_b", "--forge-token", "ghp_c"},
	} {
		_, errs, code = h.runEnv(urlOnly, args...)
		if code != 1 || !strings.Contains(errs, "pass the GitHub token as --forge-token") {
			t.Errorf("%s: exit %d %q", name, code, errs)
		}
		if _, err := h.st.GetSourceByName(context.Background(), "acme", name); err == nil {
			t.Errorf("%s: a source was created from an ambiguous command line", name)
		}
	}

	_, errs, code = h.runEnv(urlOnly, "source", "add", "github", "--org", "acme", "--name", "gh-admin-only", "--token", h.token)
	if code != 1 || !strings.Contains(errs, "appId and privateKey are required") {
		t.Errorf("a lone admin token: exit %d %q", code, errs)
	}
}

// `source add gitea|gitlab` create universal-git sources set up for the
// forge: preset, clone URL template, API root, token and the forge's own
// webhook verification.
func TestSourceAddGiteaGitLab(t *testing.T) {
	h := newHarness(t)
	env := map[string]string{"KICI_ADMIN_URL": h.srv.URL, "KICI_ADMIN_TOKEN": h.token, "GITEA_TOKEN": "gt_secret"}
	out, errs, code := h.runEnv(env, "source", "add", "gitea", "--org", "acme", "--name", "gitea", "--url", "https://gitea.example.com/", "--forge-token-from-env", "GITEA_TOKEN")
	if code != 0 || !strings.Contains(out, `Created gitea source "gitea"`) || !strings.Contains(out, "get-webhook-secret") {
		t.Fatalf("add gitea: exit %d\n%s%s", code, out, errs)
	}
	set := h.settingsOf("acme", "gitea")
	if g := set.Git; g == nil || g.Preset != "gitea" || g.GitURLTemplate != "https://gitea.example.com/{repo}.git" || g.APIBaseURL != "https://gitea.example.com" ||
		g.CredentialType != "pat" || g.Credential != "gt_secret" || set.SignatureHeader != "X-Gitea-Signature" {
		t.Errorf("gitea settings: %+v git %+v", set, set.Git)
	}

	out, errs, code = h.run("source", "add", "gitlab", "--org", "acme", "--name", "gl", "--url", "https://gitlab.example.com", "--forge-token", "glpat-x")
	if code != 0 || !strings.Contains(out, `Created gitlab source "gl"`) {
		t.Fatalf("add gitlab: exit %d\n%s%s", code, out, errs)
	}
	src, _ := h.st.GetSourceByName(context.Background(), "acme", "gl")
	set = h.settingsOf("acme", "gl")
	if g := set.Git; g == nil || g.Preset != "gitlab-repo" || g.Credential != "glpat-x" || src.VerificationMethod != "bearer_token" || set.TokenHeader != "X-Gitlab-Token" {
		t.Errorf("gitlab source %+v settings %+v git %+v", src, set, set.Git)
	}

	_, errs, code = h.run("source", "add", "gitea", "--org", "acme", "--name", "bad", "--url", "https://x.example.com", "--preset", "gitlab-repo")
	if code != 1 || !strings.Contains(errs, "must be one of gitea, forgejo, gogs") {
		t.Errorf("bad preset: exit %d %q", code, errs)
	}
	if _, err := h.st.GetSourceByName(context.Background(), "acme", "bad"); err == nil {
		t.Error("a source was created with a bad preset")
	}
}
