package e2e

// The organization pipeline of the corpus (testdata/pipelines/org-library,
// expect.yaml `org:`): one library repository and generated service
// repositories of org acme on one orchestrator. It checks the three things
// a team sharing CI across repositories relies on: the library's job piece
// runs in every repository that uses it at its pinned tag, the
// organization-wide lint runs on every repository its filter selects and
// nowhere else (and nowhere at all with the cluster setting off), a
// `[skip ci]` push starts nothing, and moving the tag to a changed piece
// shows as drift in every user instead of changing their builds.

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// orgService is one generated service repository.
type orgService struct {
	name, dir, src string
	user, legacy   bool
}

// deliveryTrace is the part of a delivery's trace these tests read.
type deliveryTrace struct {
	Summary   string `json:"summary"`
	Workflows []struct {
		Name    string `json:"name"`
		Matched bool   `json:"matched"`
		Checks  []struct {
			Check  string `json:"check"`
			Passed bool   `json:"passed"`
			Reason string `json:"reason"`
		} `json:"checks"`
	} `json:"workflows"`
	Runs []struct {
		WorkflowName string `json:"workflowName"`
		RunID        string `json:"runId"`
	} `json:"runs"`
}

// trace waits until the delivery is processed and returns its trace.
func (o *orchestrator) trace(t *testing.T, delivery string) deliveryTrace {
	t.Helper()
	var tr deliveryTrace
	wait.For(t, time.Minute, "delivery "+delivery+" processed", func() bool {
		var rec struct {
			Trace json.RawMessage `json:"trace"`
		}
		o.get(t, "/api/v1/admin/event-log/"+delivery, &rec)
		return len(rec.Trace) > 0 && json.Unmarshal(rec.Trace, &tr) == nil
	})
	return tr
}

// runNames returns the workflow names of the trace's runs, sorted by
// first appearance.
func (tr deliveryTrace) runNames() []string {
	var out []string
	for _, r := range tr.Runs {
		out = append(out, r.WorkflowName)
	}
	return out
}

// copyTree copies the files under src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func runOrgPipeline(t *testing.T, want orgExpect, name string) {
	n := want.Repos
	if s := os.Getenv("KICI_ORG_REPOS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 5 {
			t.Fatalf("KICI_ORG_REPOS=%q: want a number ≥ 5", s)
		}
		n = v
	}
	corpus := filepath.Join(pipelineCorpus, name)
	kici := filepath.Join(binDir, "kici")
	compileEnv := []string{"KICI_LIBRARY_CACHE=" + t.TempDir()}
	start := time.Now()

	lib := t.TempDir()
	copyTree(t, filepath.Join(corpus, "library"), lib)
	git(t, lib, "init", "-q", "-b", "main")
	run(t, lib, nil, kici, "compile", "--check")
	git(t, lib, "add", "-A")
	git(t, lib, "commit", "-qm", "ci library v1")
	git(t, lib, "tag", "v1")

	// Local source URLs let the run-time library drift check read the
	// library on this host; its answers are kept one second.
	o := startOrchestrator(t, loopbackSourcesEnv, "KICI_LIBRARY_REF_TTL_MS=1000")
	o.admin(t, "cluster-settings", "set", "globalWorkflowsEnabled", "1")
	libSrc := o.admin(t, "source", "add", "local", "--org", "acme", "--path", lib, "--name", "ci-library", "--quiet")
	// Its push registers the library's workflows; the lint's filter does
	// not select the library itself.
	if tr := o.trace(t, o.admin(t, "source", "trigger-local", libSrc, "--quiet")); len(tr.Runs) != 0 {
		t.Fatalf("the library's push made runs %v, want none (its lint is for svc-* only)", tr.runNames())
	}

	userCI, err := os.ReadFile(filepath.Join(corpus, "users", "ci.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	svcs := make([]*orgService, n)
	for i := range svcs {
		s := &orgService{name: fmt.Sprintf("svc-%02d", i+1), dir: t.TempDir(), user: i < want.Users}
		if (i+1)%5 == 0 {
			s.name += "-legacy"
			s.legacy = true
		}
		copyTree(t, filepath.Join(corpus, "service"), s.dir)
		write(t, filepath.Join(s.dir, "service.txt"), s.name+"\n")
		if s.user {
			ci := strings.NewReplacer("__LIBRARY__", lib, "__SERVICE__", s.name).Replace(string(userCI))
			write(t, filepath.Join(s.dir, ".kici/workflows/ci.yaml"), ci)
			run(t, s.dir, compileEnv, kici, "compile")
		}
		git(t, s.dir, "init", "-q", "-b", "main")
		git(t, s.dir, "add", "-A")
		git(t, s.dir, "commit", "-qm", "import "+s.name)
		s.src = o.admin(t, "source", "add", "local", "--org", "acme", "--path", s.dir, "--name", s.name, "--quiet")
		svcs[i] = s
	}
	deliveries := make([]string, n)
	for i, s := range svcs {
		deliveries[i] = o.admin(t, "source", "trigger-local", s.src, "--quiet")
	}

	// Each service gets exactly: ci (the library piece) when it uses it,
	// org-lint unless its name is filtered out.
	type check struct {
		svc *orgService
		wf  string
		id  string
	}
	var runs []check
	for i, s := range svcs {
		tr := o.trace(t, deliveries[i])
		var want []string
		if s.user {
			want = append(want, "ci")
		}
		if !s.legacy {
			want = append(want, "org-lint")
		}
		if got := tr.runNames(); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: runs %v, want %v (trace: %s)", s.name, got, want, tr.Summary)
		}
		for _, r := range tr.Runs {
			runs = append(runs, check{s, r.WorkflowName, r.RunID})
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	for _, c := range runs {
		var r struct {
			Run struct {
				Status         string `json:"status"`
				RepoIdentifier string `json:"repoIdentifier"`
				WorkflowOrigin string `json:"workflowOrigin"`
				FailureReason  string `json:"failureReason"`
			} `json:"run"`
		}
		o.waitRunStatus(t, c.id, runTimeout, "success", "failed", "cancelled")
		o.get(t, "/api/v1/admin/runs/"+c.id, &r)
		if r.Run.Status != "success" {
			t.Errorf("%s %s: %s (%s)", c.svc.name, c.wf, r.Run.Status, r.Run.FailureReason)
			continue
		}
		if r.Run.RepoIdentifier != "acme/"+c.svc.name {
			t.Errorf("%s %s: run of %q", c.svc.name, c.wf, r.Run.RepoIdentifier)
		}
		orgWide := c.wf == "org-lint"
		if orgWide != strings.HasPrefix(r.Run.WorkflowOrigin, "acme/ci-library@") {
			t.Errorf("%s %s: workflowOrigin %q", c.svc.name, c.wf, r.Run.WorkflowOrigin)
		}
		jobs := o.jobsOf(t, c.id)
		if orgWide && c.svc == svcs[0] {
			if l := o.logText(t, c.id, jobs["lint"].JobID, 0); !strings.Contains(l, "lint ok: "+c.svc.name) {
				t.Errorf("%s lint log: %q", c.svc.name, l)
			}
		}
		if !orgWide {
			j := jobs["release"]
			if len(j.Steps) != 3 || j.Steps[2].Status != "success" {
				t.Errorf("%s release steps: %+v", c.svc.name, j.Steps)
			} else if l := o.logText(t, c.id, j.JobID, 2); !strings.Contains(l, "published "+c.svc.name+" (piece v1)") {
				t.Errorf("%s publish log: %q", c.svc.name, l)
			}
			if l := o.logText(t, c.id, j.JobID, -1); strings.Contains(l, "library drift") {
				t.Errorf("%s: drift shown while the library ref has not moved:\n%s", c.svc.name, l)
			}
		}
	}
	if out := o.admin(t, "runs", "list", "--workflow", "org-lint"); !strings.Contains(out, "org-lint (org-wide)") {
		t.Errorf("runs list does not mark the organization-wide runs:\n%s", out)
	}
	t.Logf("%d services, %d runs: all green after %s", n, len(runs), time.Since(start).Round(time.Second))

	// [skip ci]: nothing runs, not even the organization-wide lint.
	first := svcs[0]
	write(t, filepath.Join(first.dir, "NOTES.md"), "typo fixed\n")
	git(t, first.dir, "add", "-A")
	git(t, first.dir, "commit", "-qm", "docs: fix a typo [skip ci]")
	tr := o.trace(t, o.admin(t, "source", "trigger-local", first.src, "--quiet"))
	if len(tr.Runs) != 0 {
		t.Errorf("[skip ci] push made runs %v", tr.runNames())
	}
	skipped := 0
	for _, w := range tr.Workflows {
		for _, c := range w.Checks {
			if c.Check == "skip ci" && !c.Passed {
				skipped++
			}
		}
	}
	if skipped != 2 {
		t.Errorf("[skip ci] push: %d workflows skipped by the marker, want 2 (ci, org-lint): %+v", skipped, tr.Workflows)
	}

	// The piece changes upstream and the tag moves: every user's lock now
	// drifts, and says from what to what; nothing changed their builds.
	piece := filepath.Join(lib, ".kici/pieces/build-test-publish.yaml")
	b, err := os.ReadFile(piece)
	if err != nil {
		t.Fatal(err)
	}
	write(t, piece, strings.Replace(string(b), "(piece v1)", "(piece v2)", 1))
	git(t, lib, "commit", "-qam", "publish says v2")
	git(t, lib, "tag", "-f", "v1")
	moved := git(t, lib, "rev-parse", "HEAD")[:12]
	for _, s := range svcs {
		if !s.user {
			continue
		}
		cmd := exec.Command(kici, "compile", "--check")
		cmd.Dir, cmd.Env = s.dir, append(os.Environ(), compileEnv...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if err == nil || !strings.Contains(out.String(), "library shared ref v1 now resolves to "+moved) {
			t.Errorf("%s: kici compile --check after the tag moved: %v\n%s", s.name, err, out.String())
		}
	}

	// With the cluster setting off, the lint runs nowhere but where it is
	// defined.
	o.admin(t, "cluster-settings", "set", "globalWorkflowsEnabled", "0")
	second := svcs[1]
	write(t, filepath.Join(second.dir, "CHANGES.md"), "a change\n")
	git(t, second.dir, "add", "-A")
	git(t, second.dir, "commit", "-qm", "feat: a change")
	tr = o.trace(t, o.admin(t, "source", "trigger-local", second.src, "--quiet"))
	var wantOff []string
	if second.user {
		wantOff = []string{"ci"}
	}
	if got := tr.runNames(); strings.Join(got, ",") != strings.Join(wantOff, ",") {
		t.Errorf("setting off: runs %v, want %v", got, wantOff)
	}
	for _, r := range tr.Runs {
		o.waitRunStatus(t, r.RunID, runTimeout, "success")
		// The run shows the moved library ref as drift in its setup log;
		// it still ran the locked piece.
		if r.WorkflowName == "ci" {
			setup := o.logText(t, r.RunID, o.jobsOf(t, r.RunID)["release"].JobID, -1)
			if !strings.Contains(setup, "Warning: library drift: library shared ref v1 now resolves to "+moved) {
				t.Errorf("%s: the run after the tag moved shows no library drift; setup log:\n%s", second.name, setup)
			}
		}
	}
}
