package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"kici.dev/kici/internal/testutil/forgefake"
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
