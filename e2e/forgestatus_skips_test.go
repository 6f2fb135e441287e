package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"kici.dev/kici/internal/testutil/forgefake"
	"kici.dev/kici/internal/testutil/wait"
)

// skipsWorkflow: publish passes, so rollback (on-failure) is skipped and
// so is notify after it; check fails with a long step name, so deploy is
// skipped because its upstream failed.
const skipsWorkflow = `name: ci
on: {push: {branches: [main]}}
jobs:
  publish:
    steps:
      - run: echo published
  rollback:
    needs: [{job: publish, when: on-failure}]
    steps:
      - run: echo rolling back
  notify:
    needs: [rollback]
    steps:
      - run: echo notified
  check:
    steps:
      - name: integration tests against the staging database with the full fixture set loaded and every migration applied in order
        run: exit 1
  deploy:
    needs: [check]
    steps:
      - run: echo deployed
`

// On Gitea a job skipped because its on-failure edge did not fire (and a
// job skipped after it) is success, never error; a job skipped because
// its upstream failed is error; descriptions are cut at a word boundary.
func TestForgeStatusGiteaSkippedStates(t *testing.T) {
	u := newUniversalForgeWith(t, forgefake.Gitea, "gitea", "hmac_sha256", skipsWorkflow)
	runID := u.pushGitea(t, "5e1f0c3a-7b5d-4a8e-9c21-3f9d8e7a6b50")
	u.o.waitRunStatus(t, runID, 90*time.Second, "success", "failed", "cancelled")
	prefix := "/api/v1/repos/acme/api/statuses/" + u.sha
	waitStates(t, "gitea statuses", func() map[string][]string { return u.statesOf(t, prefix, "context") },
		map[string]string{"kici/ci/publish": "success", "kici/ci/rollback": "success", "kici/ci/notify": "success",
			"kici/ci/check": "failure", "kici/ci/deploy": "error"})
	for _, r := range u.fake.Requests(prefix) {
		if r.Body["context"] != "kici/ci/check" || r.Body["state"] != "failure" {
			continue
		}
		d := fmt.Sprint(r.Body["description"])
		full := `failed: step "integration tests against the staging database with the full fixture set loaded and every migration applied in order" exited with 1`
		cut := strings.TrimSuffix(d, "…")
		if len(d) > 140 || !utf8.ValidString(d) || cut == d || !strings.HasPrefix(full, cut) || full[len(cut)] != ' ' {
			t.Errorf("description %q is not cut at a word boundary with an ellipsis", d)
		}
	}
}

// On GitLab every skipped job is `skipped`: after an on-failure edge that
// did not fire, and downstream of a failed job (which alone shows failed).
func TestForgeStatusGitLabSkippedStates(t *testing.T) {
	u := newUniversalForgeWith(t, forgefake.GitLab, "gitlab-repo", "bearer_token", skipsWorkflow)
	runID := u.pushGitLab(t, "0d3c2b1a-9f8e-4d7c-8b6a-5e4f3d2c1b0a")
	u.o.waitRunStatus(t, runID, 90*time.Second, "success", "failed", "cancelled")
	got := waitStates(t, "gitlab statuses", func() map[string][]string {
		return u.statesOf(t, "/api/v4/projects/acme%2Fapi/statuses/"+u.sha, "name")
	}, map[string]string{"kici/ci/publish": "success", "kici/ci/rollback": "skipped", "kici/ci/notify": "skipped",
		"kici/ci/check": "failed", "kici/ci/deploy": "skipped"})
	for name, states := range got {
		if name != "kici/ci/check" && slices.Contains(states, "failed") {
			t.Errorf("%s: %v shows failed", name, states)
		}
	}
}

// A fork merge request held for approval and then rejected: on GitLab its
// held jobs end `canceled` and the jobs after them `skipped`; none shows
// `failed`.
func TestForgeStatusGitLabRejectedForkMergeRequest(t *testing.T) {
	u := newUniversalForgeWith(t, forgefake.GitLab, "gitlab-repo", "bearer_token", `name: ci
on:
  pull_request:
    events: [opened]
jobs:
  build:
    steps:
      - run: echo built
  test:
    needs: [build]
    steps:
      - run: echo tested
  deploy:
    needs: [test]
    steps:
      - run: echo deployed
`)
	body := fmt.Appendf(nil, `{"object_kind":"merge_request","event_type":"merge_request","user":{"id":9,"username":"mallory"},`+
		`"project":{"id":1,"path_with_namespace":"acme/api","default_branch":"main"},`+
		`"object_attributes":{"id":99,"iid":7,"target_branch":"main","source_branch":"feature","source_project_id":14,"target_project_id":1,`+
		`"state":"opened","action":"open","last_commit":{"id":%q}}}`, u.sha)
	delivery := u.post(t, "gitlab-repo", map[string]string{"X-Gitlab-Event": "Merge Request Hook", "X-Gitlab-Token": u.secret,
		"X-Gitlab-Event-UUID": "7a1e4c2b-3d5f-4e6a-8b9c-0d1e2f3a4b5c"}, body)
	runID := u.o.runOf(t, delivery)
	u.o.waitRunStatus(t, runID, 60*time.Second, "held")
	u.o.admin(t, "held-run", "reject", runID, "--reason", "not from a fork")
	u.o.waitRunStatus(t, runID, 60*time.Second, "success", "failed", "cancelled")
	prefix := "/api/v4/projects/acme%2Fapi/statuses/" + u.sha
	var got map[string][]string
	wait.For(t, 30*time.Second, "every job's final GitLab status", func() bool {
		got = u.statesOf(t, prefix, "name")
		for _, job := range []string{"build", "test", "deploy"} {
			s := got["kici/ci/"+job]
			if len(s) == 0 || (s[len(s)-1] != "canceled" && s[len(s)-1] != "skipped") {
				return false
			}
		}
		return true
	})
	for name, states := range got {
		if slices.Contains(states, "failed") {
			t.Errorf("%s: %v shows failed after a rejection", name, states)
		}
	}
	if s := got["kici/ci/deploy"]; s[len(s)-1] != "skipped" {
		t.Errorf("deploy: %v, want skipped", s)
	}
}
