package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// commitAndPush writes files, commits them with msg and triggers a push of
// the source; it returns the delivery's trace.
func (o *orchestrator) commitAndPush(t *testing.T, repo, src, msg string, files map[string]string) deliveryTrace {
	t.Helper()
	for p, c := range files {
		write(t, filepath.Join(repo, p), c)
	}
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-qm", msg, "--allow-empty")
	return o.trace(t, o.admin(t, "source", "trigger-local", src, "--quiet"))
}

// failedCheck returns the first failed check of workflow wf in tr, "" when
// it matched.
func (tr deliveryTrace) failedCheck(wf string) string {
	for _, w := range tr.Workflows {
		if w.Name != wf || w.Matched {
			continue
		}
		for _, c := range w.Checks {
			if !c.Passed {
				return c.Check + ": " + c.Reason
			}
		}
	}
	return ""
}

// TestTriggerGateCommitMessageRequiresSkipCI pushes four commits to a
// local source through the real orchestrator: the gates read the commit
// message and a JSON file at each pushed commit, and a [skip ci] commit
// starts nothing.
func TestTriggerGateCommitMessageRequiresSkipCI(t *testing.T) {
	repo := repoWithWorkflows(t, map[string]string{
		"deploy.yaml": `name: deploy
on:
  push:
    branches: [main]
    commitMessage: {notContains: nodeploy, matches: '^(feat|fix)'}
    requires:
      - file: deploy.json
        match: {"$.enabled": true}
jobs:
  deploy:
    run: echo deploying
`,
		"always.yaml": "name: always\non: push\njobs:\n  a:\n    run: echo always\n",
	})
	write(t, filepath.Join(repo, "deploy.json"), `{"enabled": true}`)
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-qm", "feat: enable deploys")
	o := startOrchestrator(t)
	src := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "gates", "--quiet")

	tr := o.trace(t, o.admin(t, "source", "trigger-local", src, "--quiet"))
	if got := strings.Join(tr.runNames(), ","); got != "always,deploy" {
		t.Fatalf("feat commit with deploys enabled: runs %q, want always,deploy (%+v)", got, tr.Workflows)
	}
	for _, r := range tr.Runs {
		o.waitRunStatus(t, r.RunID, 2*time.Minute, "success")
	}

	for _, c := range []struct {
		msg   string
		files map[string]string
		runs  string
		why   string
	}{
		{"docs: readme [skip ci]", nil, "", "skip ci: commit message carries [skip ci]"},
		{"chore: tidy", nil, "always", "commit message matches: message does not match"},
		{"fix: nodeploy today", nil, "always", "commit message notContains: message contains it"},
		{"fix: disable", map[string]string{"deploy.json": `{"enabled": false}`}, "always", "jsonpath match: no node equals the expected value"},
	} {
		tr := o.commitAndPush(t, repo, src, c.msg, c.files)
		if got := strings.Join(tr.runNames(), ","); got != c.runs {
			t.Errorf("%q: runs %q, want %q", c.msg, got, c.runs)
		}
		if got := tr.failedCheck("deploy"); got != c.why {
			t.Errorf("%q: deploy stopped by %q, want %q", c.msg, got, c.why)
		}
	}
}

// TestReusePieceEditedWithoutRecompileIsDrift: a workflow built from a
// step piece of the repository runs the piece's steps; editing the piece
// without recompiling fails the job with the piece's drift message at run
// time, as an edited workflow file does.
func TestReusePieceEditedWithoutRecompileIsDrift(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, filepath.Join(dir, ".kici/pieces/greet.yaml"), "piece: greet\ninputs:\n  who: {type: string}\nsteps:\n  - name: greet\n    run: echo \"hello ${{ with.who }}\"\n")
	write(t, filepath.Join(dir, ".kici/workflows/ci.yaml"), "name: ci\non: push\njobs:\n  hi:\n    steps:\n      - uses: ./.kici/pieces/greet.yaml\n        with: {who: pieces}\n")
	run(t, dir, nil, filepath.Join(binDir, "kici"), "compile")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "initial")
	o := startOrchestrator(t)
	src := o.admin(t, "source", "add", "local", "--org", "acme", "--path", dir, "--name", "pieces", "--quiet")

	tr := o.trace(t, o.admin(t, "source", "trigger-local", src, "--quiet"))
	if len(tr.Runs) != 1 {
		t.Fatalf("runs %v", tr.runNames())
	}
	o.waitRunStatus(t, tr.Runs[0].RunID, 2*time.Minute, "success")
	hi := o.jobsOf(t, tr.Runs[0].RunID)["hi"]
	if l := o.logText(t, tr.Runs[0].RunID, hi.JobID, 0); !strings.Contains(l, "hello pieces") {
		t.Errorf("piece step log: %q", l)
	}

	tr = o.commitAndPush(t, dir, src, "edit the piece only", map[string]string{".kici/pieces/greet.yaml": "piece: greet\ninputs:\n  who: {type: string}\nsteps:\n  - name: greet\n    run: echo \"bye ${{ with.who }}\"\n"})
	if len(tr.Runs) != 1 {
		t.Fatalf("runs %v", tr.runNames())
	}
	o.waitRunStatus(t, tr.Runs[0].RunID, 2*time.Minute, "failed")
	if msg := o.jobsOf(t, tr.Runs[0].RunID)["hi"].ErrorMessage; !strings.Contains(msg, "piece .kici/pieces/greet.yaml, used by .kici/workflows/ci.yaml, does not match the lock file") {
		t.Errorf("job error = %q, want the piece drift message", msg)
	}
}

// TestOrgWorkflowOffUntilEnabled: an organization-wide workflow registered
// by one source does not run for another source of the org until the
// cluster setting is on; then it runs there from its own lock, checking
// out the other source's commit, and the run says where it was defined.
func TestOrgWorkflowOffUntilEnabled(t *testing.T) {
	def := repoWithWorkflows(t, map[string]string{"audit.yaml": "name: audit\non:\n  push:\n    repos: [\"acme/app-*\"]\njobs:\n  audit:\n    run: cat README.txt\n"})
	app := t.TempDir()
	git(t, app, "init", "-q", "-b", "main")
	write(t, filepath.Join(app, "README.txt"), "the app repository\n")
	git(t, app, "add", "-A")
	git(t, app, "commit", "-qm", "initial")
	o := startOrchestrator(t)
	defSrc := o.admin(t, "source", "add", "local", "--org", "acme", "--path", def, "--name", "policies", "--quiet")
	appSrc := o.admin(t, "source", "add", "local", "--org", "acme", "--path", app, "--name", "app-one", "--quiet")
	o.trace(t, o.admin(t, "source", "trigger-local", defSrc, "--quiet")) // registers audit

	if tr := o.trace(t, o.admin(t, "source", "trigger-local", appSrc, "--quiet")); len(tr.Runs) != 0 {
		t.Fatalf("setting off by default, yet runs %v", tr.runNames())
	}
	o.admin(t, "cluster-settings", "set", "globalWorkflowsEnabled", "1")
	tr := o.commitAndPush(t, app, appSrc, "second", nil)
	if len(tr.Runs) != 1 || tr.Runs[0].WorkflowName != "audit" {
		t.Fatalf("setting on: runs %v (%s)", tr.runNames(), tr.Summary)
	}
	id := tr.Runs[0].RunID
	o.waitRunStatus(t, id, 2*time.Minute, "success")
	if l := o.logText(t, id, o.jobsOf(t, id)["audit"].JobID, 0); !strings.Contains(l, "the app repository") {
		t.Errorf("audit did not read the app's checkout: %q", l)
	}
	if out := o.admin(t, "runs", "show", id); !strings.Contains(out, "acme/policies@") || !strings.Contains(out, ":.kici/workflows/audit.yaml (organization-wide)") {
		t.Errorf("runs show does not say where the workflow was defined:\n%s", out)
	}

	// The operator denies organization-wide workflows for the app source:
	// its pushes run none, and the trace says why; allowing them again
	// brings the audit back.
	if out := o.admin(t, "source", "org-wide-workflows", appSrc, "deny"); !strings.Contains(out, "Organization-wide workflows: deny for source "+appSrc) {
		t.Fatalf("deny: %q", out)
	}
	tr = o.commitAndPush(t, app, appSrc, "third", nil)
	if len(tr.Runs) != 0 {
		t.Fatalf("denied for the source, yet runs %v", tr.runNames())
	}
	denied := false
	for _, w := range tr.Workflows {
		for _, c := range w.Checks {
			denied = denied || c.Check == "org-wide workflows" && strings.Contains(c.Reason, "operator denies")
		}
	}
	if !denied {
		t.Errorf("the delivery trace does not say the operator denied them: %+v", tr.Workflows)
	}
	o.admin(t, "source", "org-wide-workflows", appSrc, "allow")
	if tr = o.commitAndPush(t, app, appSrc, "fourth", nil); len(tr.Runs) != 1 || tr.Runs[0].WorkflowName != "audit" {
		t.Fatalf("allowed again: runs %v (%s)", tr.runNames(), tr.Summary)
	}
}
