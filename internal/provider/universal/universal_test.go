package universal

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"kici.dev/kici/internal/testutil/fixtures"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/provider/github"
	"kici.dev/kici/internal/trigger"
)

func read(t testing.TB, name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type want struct {
	typ, action, target, source, base, repo, sender, lockRef, baseRef string
	fork                                                              bool
}

func checkEvent(t *testing.T, name string, ev *trigger.Event, ref provider.LockRef, w want, prov string) {
	t.Helper()
	got := want{string(ev.Type), ev.Action, ev.TargetBranch, ev.SourceBranch, ev.BaseBranch, ev.SourceRepo, ev.SenderUsername, ref.Ref, ref.BaseRef, ev.IsForkPR}
	if got != w {
		t.Errorf("%s:\n got %+v\nwant %+v", name, got, w)
	}
	if ev.Provider != provider.Name(prov) {
		t.Errorf("%s: provider %q, want %q", name, ev.Provider, prov)
	}
}

// TestGiteaFamily normalizes Gitea/Forgejo/Gogs payloads into the same
// event shape as GitHub's.
func TestGiteaFamily(t *testing.T) {
	const sha = "bffeb74224043ba2feb48d137756c8a9331c449a"
	const head = "1234567890123456789012345678901234567890"
	for _, preset := range []string{PresetGitea, PresetForgejo} {
		cfg := Config{Preset: preset}
		for _, tc := range []struct {
			file, event string
			w           want
		}{
			{"gitea-push.json", "push", want{"push", "", "develop", "", "", "org/app", "alice", sha, "", false}},
			{"gitea-tag.json", "push", want{"tag", "", "v1.2.0", "", "", "org/app", "alice", sha, "", false}},
			{"gitea-pr.json", "pull_request", want{"pull_request", "synchronize", "main", "feature/x", "main", "org/app", "bob", head, "main", true}},
			{"gitea-pr.json", "pull_request_sync", want{"pull_request", "synchronize", "main", "feature/x", "main", "org/app", "bob", head, "main", true}},
			{"gitea-review.json", "pull_request_review_approved", want{"review", "submitted", "main", "feature/x", "main", "org/app", "carol", head, "main", false}},
			{"gitea-issue-comment.json", "issue_comment", want{"comment", "created", "main", "", "", "org/app", "alice", "HEAD", "", false}},
			{"gitea-pr-comment.json", "issue_comment", want{"comment", "created", "main", "", "", "org/app", "alice", "HEAD", "", false}},
			{"gitea-release.json", "release", want{"release", "published", "main", "", "", "org/app", "alice", "main", "", false}},
			{"gitea-create.json", "create", want{"create", "", "release-2", "", "", "org/app", "alice", "HEAD", "", false}},
		} {
			ev, ref, err := Normalize(cfg, tc.event, read(t, tc.file))
			if err != nil {
				t.Errorf("%s %s: %v", preset, tc.file, err)
				continue
			}
			checkEvent(t, preset+" "+tc.file, ev, ref, tc.w, preset)
		}
	}
	ev, ref, err := Normalize(Config{Preset: PresetGogs}, "push", read(t, "gogs-push.json"))
	if err != nil {
		t.Fatal(err)
	}
	checkEvent(t, "gogs push", ev, ref, want{"push", "", "main", "", "", "team/site", "dave", "bffeb74224043ba2feb48d137756c8a9331c449a", "", false}, "gogs")
}

// TestGiteaCommentSourceAndReviewState: the payload gets GitHub-shaped
// fields, so comment `on: issue|pr` and review `states` triggers work.
func TestGiteaCommentSourceAndReviewState(t *testing.T) {
	wf := &lockfile.Workflow{Name: "w", Triggers: []lockfile.Trigger{{Type: "comment", CommentOn: "issue", BodyMatch: &lockfile.Pattern{Type: lockfile.PatternGlob, Pattern: "/deploy*"}}}}
	ev, _, err := Normalize(Config{Preset: PresetGitea}, "issue_comment", read(t, "gitea-issue-comment.json"))
	if err != nil {
		t.Fatal(err)
	}
	if d := trigger.MatchWorkflow(wf, ev); !d.Matched {
		t.Errorf("issue comment (pull_request: null) did not match on: issue: %+v", d)
	}
	ev, _, _ = Normalize(Config{Preset: PresetGitea}, "issue_comment", read(t, "gitea-pr-comment.json"))
	if d := trigger.MatchWorkflow(wf, ev); d.Matched {
		t.Errorf("PR comment matched on: issue")
	}
	rw := &lockfile.Workflow{Name: "r", Triggers: []lockfile.Trigger{{Type: "review", States: []string{"approved"}}}}
	ev, _, _ = Normalize(Config{Preset: PresetGitea}, "pull_request_review_approved", read(t, "gitea-review.json"))
	if d := trigger.MatchWorkflow(rw, ev); !d.Matched {
		t.Errorf("approved review did not match: %+v", d)
	}
	ev, _, _ = Normalize(Config{Preset: PresetGitea}, "pull_request_review_rejected", read(t, "gitea-review.json"))
	if d := trigger.MatchWorkflow(rw, ev); d.Matched {
		t.Errorf("rejected review matched states [approved]")
	}
}

// TestGitLab normalizes GitLab project hooks.
func TestGitLab(t *testing.T) {
	cfg := Config{Preset: PresetGitLabRepo}
	for _, tc := range []struct {
		file, event string
		w           want
	}{
		{"gitlab-push.json", "Push Hook", want{"push", "", "main", "", "", "mike/diaspora", "jsmith", "da1560886d4f094c3e6c9ef40349f7d38b5d27d7", "", false}},
		{"gitlab-tag.json", "Tag Push Hook", want{"tag", "", "v1.0.0", "", "", "jsmith/example", "root", "82b3d5ae55f7080f1e6022629cdb57bfae7cccc7", "", false}},
		{"gitlab-mr.json", "Merge Request Hook", want{"pull_request", "synchronize", "master", "ms-viewport", "master", "gitlabhq/gitlab-test", "root", "da1560886d4f094c3e6c9ef40349f7d38b5d27d7", "master", true}},
		{"gitlab-note.json", "Note Hook", want{"comment", "created", "master", "", "", "gitlabhq/gitlab-test", "root", "HEAD", "", false}},
		{"gitlab-release.json", "Release Hook", want{"release", "created", "master", "", "", "gitlab-org/release-webhook-example", "", "ee0f691", "", false}},
	} {
		ev, ref, err := Normalize(cfg, tc.event, read(t, tc.file))
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		checkEvent(t, tc.file, ev, ref, tc.w, "gitlab-repo")
	}
	ev, _, _ := Normalize(cfg, "Note Hook", read(t, "gitlab-note.json"))
	wf := &lockfile.Workflow{Name: "w", Triggers: []lockfile.Trigger{{Type: "comment", CommentOn: "pr", BodyMatch: &lockfile.Pattern{Type: lockfile.PatternRegex, Pattern: `^/deploy\s+\w+$`}}}}
	if d := trigger.MatchWorkflow(wf, ev); !d.Matched {
		t.Errorf("MR note did not match a pr comment trigger: %+v", d)
	}
	if _, _, err := Normalize(cfg, "Pipeline Hook", []byte(`{}`)); !errors.Is(err, provider.ErrUnsupportedEvent) {
		t.Errorf("Pipeline Hook: %v", err)
	}
}

// TestGitHubRepoPresetEveryFixture: the github-repo preset gives exactly
// the GitHub normalizer's result on every real GitHub payload, with its own
// provider name.
func TestGitHubRepoPresetEveryFixture(t *testing.T) {
	dir := os.Getenv("KICI_GITHUB_FIXTURES")
	if dir == "" {
		dir = fixtures.GitHubWebhooksDir()
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) < 300 {
		t.Fatalf("GitHub fixtures not found in %s (%d files, %v)", dir, len(files), err)
	}
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		event := strings.SplitN(filepath.Base(f), ".", 2)[0]
		ev, ref, err := Normalize(Config{Preset: PresetGitHubRepo}, event, body)
		gev, gref, gerr := github.Normalize(event, body)
		if (err == nil) != (gerr == nil) || (err != nil && errors.Is(err, provider.ErrUnsupportedEvent) != errors.Is(gerr, provider.ErrUnsupportedEvent)) {
			t.Errorf("%s: err %v vs github %v", f, err, gerr)
			continue
		}
		if err != nil {
			continue
		}
		if ev.Provider != "github-repo" {
			t.Errorf("%s: provider %q", f, ev.Provider)
		}
		ev.Provider = gev.Provider
		if !reflect.DeepEqual(ev, gev) || ref != gref {
			t.Errorf("%s: differs from the GitHub normalizer", f)
		}
	}
}

// TestCustomMapping: JSONPath payloadPaths + eventMapping.
func TestCustomMapping(t *testing.T) {
	cfg := Config{
		Preset: PresetCustom,
		PayloadPaths: map[string]string{
			"ref": "$.data.ref", "sha": "$.data.commit", "repo": "$.data.repository.slug",
			"sender": "$.actor.name", "action": "action", "sourceBranch": "$.data.from",
		},
		EventMapping: map[string]string{"code.pushed": "push", "review.opened": "pull_request"},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"action":"opened","actor":{"name":"erin"},"data":{"ref":"refs/tags/v3","commit":"abc123","repository":{"slug":"acme/api"},"from":"topic"}}`)
	ev, ref, err := Normalize(cfg, "code.pushed", body)
	if err != nil {
		t.Fatal(err)
	}
	checkEvent(t, "custom tag", ev, ref, want{"tag", "", "v3", "topic", "", "acme/api", "erin", "abc123", "", false}, "custom")
	body = []byte(`{"action":"opened","actor":{"name":"erin"},"data":{"ref":"refs/heads/main","commit":"abc123","repository":{"slug":"acme/api"},"from":"topic"}}`)
	ev, ref, err = Normalize(cfg, "review.opened", body)
	if err != nil {
		t.Fatal(err)
	}
	checkEvent(t, "custom pr", ev, ref, want{"pull_request", "opened", "main", "topic", "main", "acme/api", "erin", "abc123", "main", false}, "custom")
	if _, _, err := Normalize(cfg, "something.else", body); !errors.Is(err, provider.ErrUnsupportedEvent) {
		t.Errorf("unmapped event: %v", err)
	}
	if _, _, err := Normalize(cfg, "code.pushed", []byte(`{"data":{}}`)); !errors.Is(err, provider.ErrUnsupportedEvent) {
		t.Errorf("no ref: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, bad := range []Config{
		{Preset: "bitbucket"},
		{Preset: PresetCustom},
		{Preset: PresetCustom, EventMapping: map[string]string{"x": "push"}},
		{Preset: PresetCustom, EventMapping: map[string]string{"x": "push"}, PayloadPaths: map[string]string{"sha": "$.a"}},
		{Preset: PresetCustom, EventMapping: map[string]string{"x": "teleport"}, PayloadPaths: map[string]string{"ref": "$.a"}},
		{Preset: PresetCustom, EventMapping: map[string]string{"x": "push"}, PayloadPaths: map[string]string{"ref": "$["}},
		{Preset: PresetCustom, EventMapping: map[string]string{"x": "push"}, PayloadPaths: map[string]string{"ref": "$.a", "color": "$.b"}},
		{Preset: PresetGitea, EventMapping: map[string]string{"x": "push"}},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
		if _, _, err := Normalize(bad, "x", []byte(`{}`)); err == nil || errors.Is(err, provider.ErrUnsupportedEvent) {
			t.Errorf("%+v: Normalize err %v", bad, err)
		}
	}
	for _, p := range Presets() {
		if p != PresetCustom && EventHeader(p) == "" {
			t.Errorf("preset %s has no event header", p)
		}
	}
}

// TestUnsupportedAndInvalid: unknown events are typed results; bodies that
// are not objects are ErrInvalidPayload.
func TestUnsupportedAndInvalid(t *testing.T) {
	for _, p := range []string{PresetGitea, PresetForgejo, PresetGogs, PresetGitLabRepo, PresetGitHubRepo} {
		if _, _, err := Normalize(Config{Preset: p}, "wiki", []byte(`{}`)); !errors.Is(err, provider.ErrUnsupportedEvent) {
			t.Errorf("%s wiki: %v", p, err)
		}
	}
	for _, p := range []string{PresetGitea, PresetGitLabRepo} {
		ev := map[string]string{PresetGitea: "push", PresetGitLabRepo: "Push Hook"}[p]
		if _, _, err := Normalize(Config{Preset: p}, ev, []byte(`"x"`)); !errors.Is(err, provider.ErrInvalidPayload) {
			t.Errorf("%s invalid body: %v", p, err)
		}
	}
}
