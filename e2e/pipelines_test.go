package e2e

// The pipeline corpus (testdata/pipelines): each directory is a small real
// project with its workflows, compiled lock and expect.yaml. For each, the
// harness makes a git repository of the directory, starts the real
// orchestrator (which spawns real agents), triggers the runs expect.yaml
// lists, checks what a user would check, then runs `kici run local` on the
// same repository. `make test` runs the pipelines marked short; `make
// acceptance` (KICI_ACCEPTANCE=1) runs all of them.

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// runTimeout bounds one run of the corpus from trigger to terminal status
// (a cold Go build on two shared cores takes minutes).
const runTimeout = 8 * time.Minute

func TestPipelines(t *testing.T) {
	corpus, names, err := loadPipelines()
	if err != nil {
		t.Fatal(err)
	}
	all := os.Getenv("KICI_ACCEPTANCE") != ""
	for _, name := range names {
		p := corpus[name]
		t.Run(name, func(t *testing.T) {
			if !p.Short && !all {
				t.Skip("acceptance only: make acceptance (KICI_ACCEPTANCE=1) runs it")
			}
			if p.Org != nil {
				runOrgPipeline(t, *p.Org, name)
				return
			}
			buildCorpusImages(t, p.DockerImages)
			// Each phase gets its own repository: the server's runs commit
			// their changes, the local check runs the pipeline as imported.
			t.Run("server", func(t *testing.T) {
				runPipelineOnServer(t, p, pipelineRepo(t, name))
			})
			if p.Local != nil {
				t.Run("local", func(t *testing.T) {
					runPipelineLocally(t, *p.Local, pipelineRepo(t, name))
				})
			}
		})
	}
}

// TestPipelineCorpusIsValid checks, for every pipeline (short or not),
// that expect.yaml parses and the committed lock matches the workflows.
func TestPipelineCorpusIsValid(t *testing.T) {
	_, names, err := loadPipelines()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("the corpus is empty")
	}
	corpus, _, _ := loadPipelines()
	for _, name := range names {
		dir := filepath.Join(pipelineCorpus, name)
		if corpus[name].Org != nil {
			dir = filepath.Join(dir, "library") // the services are generated
		}
		run(t, dir, nil, filepath.Join(binDir, "kici"), "compile", "--check", "--dir", ".")
	}
}

// pipelineRepo copies the pipeline's directory (without expect.yaml) into
// a fresh git repository on main, checks its lock is fresh and commits it.
func pipelineRepo(t *testing.T, name string) string {
	t.Helper()
	src := filepath.Join(pipelineCorpus, name)
	dir := t.TempDir()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if rel == "expect.yaml" {
			return nil
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, fi.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	git(t, dir, "init", "-q", "-b", "main")
	run(t, dir, nil, filepath.Join(binDir, "kici"), "compile", "--check")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "import "+name)
	return dir
}

// pipelineServer is one orchestrator with the pipeline's repository as a
// source.
type pipelineServer struct {
	o     *orchestrator
	repo  string
	src   string     // local source id ("" with a forge)
	forge *forgeRepo // nil for a local source
}

func runPipelineOnServer(t *testing.T, p pipelineExpect, repo string) {
	s := &pipelineServer{repo: repo}
	env := p.OrchestratorEnv
	if p.Forge != "" {
		env = append(env, "KICI_PUBLIC_URL="+forgePublicURL, loopbackSourcesEnv)
	}
	s.o = startOrchestrator(t, env...)
	if p.Forge != "" {
		s.forge = newForgeRepo(t, s.o, p.Forge, repo)
	} else {
		s.src = s.o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "corpus", "--quiet")
	}
	for _, c := range p.Contexts {
		args := []string{"context", "create", "--org", "acme", "--name", c.Name}
		if c.RequiredReviewers != "" {
			args = append(args, "--required-reviewers", c.RequiredReviewers)
		}
		s.o.admin(t, args...)
		for k, v := range c.Variables {
			s.o.admin(t, "variable", "set", "acme", c.Name, k, v)
		}
	}
	for i, want := range p.Runs {
		label := want.Name
		if label == "" {
			label = fmt.Sprintf("run %d", i+1)
		}
		s.checkRun(t, label, want)
	}
}

// checkRun triggers one run of the pipeline and checks its outcome.
func (s *pipelineServer) checkRun(t *testing.T, label string, want runExpect) {
	t.Helper()
	if len(want.Change) > 0 {
		for path, content := range want.Change {
			write(t, filepath.Join(s.repo, path), content)
		}
		git(t, s.repo, "add", "-A")
		git(t, s.repo, "commit", "-qm", label)
	}
	runs := s.trigger(t, label, want)
	if want.NoRun {
		if len(runs) != 0 {
			t.Errorf("%s: the delivery started %d runs, want none", label, len(runs))
		}
		return
	}
	if want.Cancel != nil {
		s.cancelAt(t, label, runs, *want.Cancel)
	}
	if want.Approve != nil {
		s.approveHold(t, label, runs, *want.Approve)
	}
	jobs := map[string]jobRow{}
	runOfJob := map[string]string{}
	var workflows []string
	for _, r := range runs {
		done := s.o.waitRunStatus(t, r.RunID, runTimeout, "success", "failed", "cancelled")
		workflows = append(workflows, done.WorkflowName)
		if done.Status != want.Status {
			t.Errorf("%s: run of %s is %s (%s), want %s", label, done.WorkflowName, done.Status, done.FailureReason, want.Status)
		}
		for name, j := range s.o.jobsOf(t, r.RunID) {
			key := name
			if len(runs) > 1 {
				key = done.WorkflowName + "/" + name
			}
			jobs[key], runOfJob[key] = j, r.RunID
		}
	}
	if want.Workflows != nil {
		sort.Strings(workflows)
		w := slices.Sorted(slices.Values(want.Workflows))
		if !slices.Equal(workflows, w) {
			t.Errorf("%s: the delivery ran workflows %v, want %v", label, workflows, w)
		}
	}
	failed := func() string { return s.jobsReport(t, jobs, runOfJob) }
	checkJobStatuses(t, label, statusesOf(jobs), want.Jobs, want.JobCount, want.JobsStatus, failed)
	s.checkJobs(t, label, want, jobs, runOfJob)
	if len(want.Artifacts) > 0 || len(want.Attestations) > 0 {
		s.checkBlobs(t, label, runs, want)
	}
	if len(want.Statuses) > 0 {
		s.forge.waitStatuses(t, label, git(t, s.repo, "rev-parse", "HEAD"), want.Statuses)
	}
}

// checkJobs checks what the jobs of a run left: errors, step statuses, log
// lines, outputs and cache hits or misses.
func (s *pipelineServer) checkJobs(t *testing.T, label string, want runExpect, jobs map[string]jobRow, runOfJob map[string]string) {
	t.Helper()
	for job, text := range want.JobErrors {
		if msg := jobs[job].ErrorMessage; !strings.Contains(msg, text) {
			t.Errorf("%s: job %s error %q, want it to contain %q", label, job, msg, text)
		}
	}
	for job, steps := range want.Steps {
		for step, st := range steps {
			if got := stepStatus(jobs[job], step); got != st {
				t.Errorf("%s: job %s step %s is %q, want %q", label, job, step, got, st)
			}
		}
	}
	for _, l := range want.Logs {
		text := s.stepLog(t, runOfJob[l.Job], jobs[l.Job], l.Step)
		for _, c := range l.Contains {
			if !strings.Contains(text, c) {
				t.Errorf("%s: log of %s/%s lacks %q:\n%s", label, l.Job, l.Step, c, text)
			}
		}
		for _, c := range l.NotContain {
			if strings.Contains(text, c) {
				t.Errorf("%s: log of %s/%s has %q:\n%s", label, l.Job, l.Step, c, text)
			}
		}
	}
	for job, outs := range want.Outputs {
		for k, v := range outs {
			if got := jobs[job].Outputs[k]; got != v {
				t.Errorf("%s: job %s output %s = %q, want %q (outputs %v)", label, job, k, got, v, jobs[job].Outputs)
			}
		}
	}
	for job, c := range want.Caches {
		setup := s.stepLog(t, runOfJob[job], jobs[job], "setup")
		restored, saved := strings.Contains(setup, " restored: "), strings.Contains(setup, " saved: ")
		if c == "hit" && (!restored || saved) || c == "miss" && (!strings.Contains(setup, "Cache miss for ") || !saved) {
			t.Errorf("%s: job %s cache should be a %s (hit: restored the exact key and saved nothing; miss: missed and saved); setup log:\n%s", label, job, c, setup)
		}
	}
}

// trigger starts the run(s) of one expectation and returns them once the
// delivery is processed (so the set of workflows it ran is complete).
func (s *pipelineServer) trigger(t *testing.T, label string, want runExpect) []runView {
	t.Helper()
	if m := want.Manual; m != nil {
		for _, bad := range m.Refused {
			out := s.o.adminFails(t, append([]string{"runs", "start", "--source", s.sourceID(), "--workflow", m.Workflow, "--ref", "main"}, inputFlags(bad.Inputs)...)...)
			if !strings.Contains(out, bad.Error) {
				t.Errorf("%s: refused inputs %v: %s, want %q", label, bad.Inputs, out, bad.Error)
			}
		}
		id := s.o.admin(t, append([]string{"runs", "start", "--source", s.sourceID(), "--workflow", m.Workflow, "--ref", "main", "--quiet"}, inputFlags(m.Inputs)...)...)
		return []runView{{RunID: id}}
	}
	var delivery string
	if s.forge != nil {
		delivery = s.forge.push(t, s.repo)
	} else {
		delivery = s.o.admin(t, "source", "trigger-local", s.src, "--quiet")
	}
	waitProcessed(t, s.o, delivery)
	var list struct {
		Runs []runView `json:"runs"`
	}
	s.o.get(t, "/api/v1/admin/runs?deliveryId="+delivery, &list)
	if len(list.Runs) == 0 && !want.NoRun {
		t.Fatalf("%s: delivery %s started no run", label, delivery)
	}
	return list.Runs
}

// sourceID is the id manual runs name.
func (s *pipelineServer) sourceID() string {
	if s.forge != nil {
		return s.forge.sourceID
	}
	return s.src
}

func inputFlags(inputs map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(mapsKeys(inputs)) {
		out = append(out, "--input", k+"="+inputs[k])
	}
	return out
}

func slicesSortedKeys[V any](m map[string]V) []string { return slices.Sorted(mapsKeys(m)) }

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// cancelAt waits until the job's log shows the line, then cancels the
// run the way an operator does.
func (s *pipelineServer) cancelAt(t *testing.T, label string, runs []runView, mark logMark) {
	t.Helper()
	for _, r := range runs {
		wait.For(t, runTimeout, label+": "+mark.Job+" to print "+mark.Line, func() bool {
			j, ok := s.o.jobsOf(t, r.RunID)[mark.Job]
			if !ok {
				return false
			}
			for i := range j.Steps {
				if strings.Contains(s.o.logText(t, r.RunID, j.JobID, j.Steps[i].StepIndex), mark.Line) {
					return true
				}
			}
			return false
		})
		s.o.admin(t, "runs", "cancel", r.RunID)
	}
}

// approveHold waits for the job to be held for a reviewer and approves it.
func (s *pipelineServer) approveHold(t *testing.T, label string, runs []runView, a approval) {
	t.Helper()
	for _, r := range runs {
		wait.For(t, runTimeout, label+": job "+a.Job+" held for a reviewer", func() bool {
			return s.o.jobsOf(t, r.RunID)[a.Job].Status == "held"
		})
		if holds := s.o.heldRuns(t, r.RunID); len(holds) != 1 || holds[0].HoldType != "reviewer" {
			t.Fatalf("%s: holds %+v, want one reviewer hold", label, holds)
		}
		s.o.admin(t, "held-run", "approve", r.RunID, "--reason", a.Reason)
	}
}

// stepLog is the text of a job's step named step ("setup": the setup log).
func (s *pipelineServer) stepLog(t *testing.T, runID string, j jobRow, step string) string {
	t.Helper()
	if j.JobID == "" {
		t.Fatalf("no job to read the %s log of", step)
	}
	if step == "setup" {
		return s.o.logText(t, runID, j.JobID, -1)
	}
	for _, st := range j.Steps {
		if st.StepName == step {
			return s.o.logText(t, runID, j.JobID, st.StepIndex)
		}
	}
	t.Fatalf("job %s has no step %q (steps %+v)", j.JobName, step, j.Steps)
	return ""
}

// checkBlobs checks the artifacts the CLI lists and the attestations signed.
func (s *pipelineServer) checkBlobs(t *testing.T, label string, runs []runView, want runExpect) {
	t.Helper()
	var listed string
	var subjects []string
	for _, r := range runs {
		listed += s.o.admin(t, "runs", "artifacts", r.RunID)
		for _, a := range s.o.attestations(t, r.RunID) {
			subjects = append(subjects, a.SubjectName)
		}
	}
	for _, a := range want.Artifacts {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(a) + `\s`).MatchString(listed) {
			t.Errorf("%s: runs artifacts does not list %s:\n%s", label, a, listed)
		}
	}
	for _, a := range want.Attestations {
		if !slices.Contains(subjects, a) {
			t.Errorf("%s: no attestation of %s (have %v)", label, a, subjects)
		}
	}
}

// jobsReport is every job's status and error with its setup log, for a
// failure message.
func (s *pipelineServer) jobsReport(t *testing.T, jobs map[string]jobRow, runOf map[string]string) string {
	var b strings.Builder
	for _, name := range slices.Sorted(mapsKeys(jobs)) {
		j := jobs[name]
		b.WriteString("== " + name + ": " + j.Status + " " + j.ErrorMessage + "\n")
		if j.Status != "success" && j.Status != "skipped" {
			b.WriteString(s.o.logText(t, runOf[name], j.JobID, -1))
			for _, st := range j.Steps {
				b.WriteString(s.o.logText(t, runOf[name], j.JobID, st.StepIndex))
			}
		}
	}
	return b.String()
}

func statusesOf(jobs map[string]jobRow) map[string]string {
	out := map[string]string{}
	for name, j := range jobs {
		out[name] = j.Status
	}
	return out
}

func stepStatus(j jobRow, name string) string {
	for _, st := range j.Steps {
		if st.StepName == name {
			return st.Status
		}
	}
	return "(no such step)"
}

// checkJobStatuses compares job statuses with the expectation: every job
// listed (exactly), or count jobs all of status all.
func checkJobStatuses(t *testing.T, label string, got, want map[string]string, count int, all string, report func() string) {
	t.Helper()
	ok := true
	if count > 0 {
		if len(got) != count {
			t.Errorf("%s: %d jobs, want %d", label, len(got), count)
			ok = false
		}
		for name, st := range got {
			if st != all {
				t.Errorf("%s: job %s is %s, want %s", label, name, st, all)
				ok = false
			}
		}
	} else {
		for name, st := range want {
			if got[name] != st {
				t.Errorf("%s: job %s is %q, want %q", label, name, got[name], st)
				ok = false
			}
		}
		for name := range got {
			if _, listed := want[name]; !listed {
				t.Errorf("%s: unexpected job %s (%s)", label, name, got[name])
				ok = false
			}
		}
	}
	if !ok {
		t.Logf("%s: jobs:\n%s", label, report())
	}
}

// localJobLine is a job line of `kici run local`'s summary.
var localJobLine = regexp.MustCompile(`(?m)^  (\S.*?)\s+(success|failed|skipped|cancelled)\b`)

// runPipelineLocally runs `kici run local` on the committed repository and
// checks its summary.
func runPipelineLocally(t *testing.T, want localExpect, repo string) {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "kici"), append(append([]string{"run", "local"}, want.Args...), "--dir", repo, "--committed")...)
	cmd.Env = cleanEnv()
	var buf lockedBuffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if want.InterruptAt != "" {
		// The user presses Ctrl-C once the line shows.
		wait.For(t, runTimeout, "kici run local to print "+want.InterruptAt, func() bool { return strings.Contains(buf.String(), want.InterruptAt) })
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
	}
	err := cmd.Wait()
	out := buf.String()
	if ctx.Err() != nil {
		t.Fatalf("kici run local did not finish in %s:\n%s", runTimeout, out)
	}
	if (err != nil) != want.Fails {
		t.Errorf("kici run local: exit error %v, want failure %v", err, want.Fails)
	}
	got := map[string]string{}
	for _, m := range localJobLine.FindAllStringSubmatch(out, -1) {
		got[m[1]] = m[2]
	}
	report := func() string { return out }
	checkJobStatuses(t, "kici run local", got, want.Jobs, want.JobCount, want.JobsStatus, report)
	for _, c := range want.Contains {
		if !strings.Contains(out, c) {
			t.Errorf("kici run local output lacks %q:\n%s", c, out)
		}
	}
}
