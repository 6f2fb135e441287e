package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"kici.dev/kici/internal/runs/status"

	"github.com/google/uuid"

	"kici.dev/kici/internal/agent/runner"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlite"
	"kici.dev/kici/internal/trigger"
)

// localTree is what `kici run local` runs: a commit (HEAD, or a snapshot
// of the working tree) and the directory whose .kici holds its workflows
// and lock.
type localTree struct {
	sha, ref string
	// tree is the directory holding the .kici files of that commit.
	tree string
}

// localSource resolves what runs. The working tree (default) becomes a
// commit object built with a temporary index (`git add -A` honours
// .gitignore) and held by a temporary ref so the runner's checkout can
// fetch it; the user's index, branch and files are untouched. cleanup
// removes the ref and any exported tree.
func localSource(root string, committed bool) (*localTree, func(), error) {
	head, err := gitOut(root, "rev-parse", "HEAD")
	if err != nil {
		return nil, nil, fmt.Errorf("%s: no commit to run (git rev-parse HEAD: %v)", root, err)
	}
	ref, _ := gitOut(root, "symbolic-ref", "-q", "HEAD")
	if ref == "" {
		ref = head
	}
	if committed {
		dir, err := exportTree(root, head)
		if err != nil {
			return nil, nil, err
		}
		return &localTree{sha: head, ref: ref, tree: dir}, func() { os.RemoveAll(dir) }, nil
	}
	idx, err := os.CreateTemp("", "kici-index-")
	if err != nil {
		return nil, nil, err
	}
	idx.Close()
	defer os.Remove(idx.Name())
	gitIdx := func(args ...string) (string, error) {
		cmd := gitCmd(root, args...)
		cmd.Env = append(os.Environ(), "GIT_INDEX_FILE="+idx.Name())
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("snapshot of the working tree: git %v: %v: %s", args, err, out)
		}
		return string(trimNL(out)), nil
	}
	if _, err := gitIdx("read-tree", head); err != nil {
		return nil, nil, err
	}
	if _, err := gitIdx("add", "-A"); err != nil {
		return nil, nil, err
	}
	tree, err := gitIdx("write-tree")
	if err != nil {
		return nil, nil, err
	}
	sha, err := gitIdx("-c", "user.name=kici", "-c", "user.email=kici@localhost", "commit-tree", tree, "-p", head, "-m", "kici run local: working tree")
	if err != nil {
		return nil, nil, err
	}
	tmpRef := "refs/kici/run-local/" + uuid.NewString()
	if _, err := gitIdx("update-ref", tmpRef, sha); err != nil {
		return nil, nil, err
	}
	return &localTree{sha: sha, ref: ref, tree: root}, func() { _, _ = gitOut(root, "update-ref", "-d", tmpRef) }, nil
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// manualInputs resolves --input values against the matched trigger's
// declared inputs (dispatch, schedule), like the orchestrator does for a
// manual run; the event's changed files come along. A trigger that
// declares no inputs (a push) sees the workflow's input defaults, as on
// the orchestrator.
func manualInputs(wf *lockfile.Workflow, d trigger.Decision, ev *trigger.Event, given map[string]string) (*store.RunContext, error) {
	rc := &store.RunContext{ChangedPaths: ev.ChangedFiles}
	var descriptors json.RawMessage
	if d.MatchedTrigger != nil && *d.MatchedTrigger < len(wf.Triggers) {
		descriptors = wf.Triggers[*d.MatchedTrigger].Inputs
	}
	if len(descriptors) == 0 && len(given) == 0 {
		rc.Inputs = lockfile.WithInputDefaults(wf, nil)
		return rc, nil
	}
	raw := make(map[string]any, len(given))
	for k, v := range given {
		raw[k] = v
	}
	in, err := lockfile.ResolveInputs(descriptors, raw)
	if err != nil {
		return nil, fmt.Errorf("workflow %s: %v", wf.Name, err)
	}
	rc.Inputs = lockfile.WithInputDefaults(wf, in)
	return rc, nil
}

// localEngine drives runs through the orchestrator's execution tracker over
// the local SQLite run database (localStateDir), running each released job
// with the agent's runner, one at a time, with the orchestrator's cache and
// artifact routes served locally (localBlobs).
type localEngine struct {
	st    *sqlite.Store
	tr    *runs.Tracker
	r     *runner.Runner
	em    *printEmitter
	blobs *localBlobs

	mu    sync.Mutex
	ready []string // released job ids, in release order
}

// EnqueueJob records a released job; it is called under the tracker's run
// lock, so it only queues.
func (e *localEngine) EnqueueJob(_ context.Context, job *store.Job) error {
	e.mu.Lock()
	e.ready = append(e.ready, job.ID)
	e.mu.Unlock()
	return nil
}

// newLocalEngine opens the run database, blob routes and provenance signer
// in dir and makes the runner (newRunner, given the routes' base URL and
// the signer's attest function).
func newLocalEngine(ctx context.Context, dir string, em *printEmitter, newRunner func(blobsURL string, attest runner.AttestFunc) *runner.Runner) (*localEngine, error) {
	st, err := sqlite.Open(ctx, filepath.Join(dir, "runs.db"))
	if err != nil {
		return nil, err
	}
	prov, err := localProvenance(ctx, st, dir)
	if err != nil {
		st.Close()
		return nil, err
	}
	lb, err := startLocalBlobs(st, dir)
	if err != nil {
		st.Close()
		return nil, err
	}
	e := &localEngine{st: st, r: newRunner(lb.url, prov.AttestRefs), em: em, blobs: lb}
	e.tr = runs.NewTracker(st, e, nil, runs.TrackerDeps{})
	return e, nil
}

func (e *localEngine) close() {
	e.blobs.close()
	e.st.Close()
}

func (e *localEngine) next() (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.ready) == 0 {
		return "", false
	}
	id := e.ready[0]
	e.ready = e.ready[1:]
	return id, true
}

// run creates the run and runs its released jobs until none is left, then
// returns the jobs as stored (terminal statuses and skip reasons).
func (e *localEngine) run(ctx context.Context, run *store.Run, jobs []*store.Job, rc *store.RunContext) ([]*store.Job, error) {
	run.OrgID = "local"
	if err := e.tr.CreateRunWithContext(ctx, run, jobs, rc); err != nil {
		return nil, err
	}
	for {
		id, ok := e.next()
		if !ok {
			break
		}
		rows, err := e.st.DispatchRows(ctx, run.ID, id)
		if err != nil {
			return nil, err
		}
		job := rows.Job
		if ctx.Err() != nil {
			if err := e.tr.JobFinished(context.WithoutCancel(ctx), id, status.JobCancelled, string(status.JobCancelled), time.Now()); err != nil {
				return nil, err
			}
			continue
		}
		msg := runs.NewJobDispatch(rows.Run, rows.Context, job, rows.Jobs, rows.Outputs)
		msg.Env["KICI_LOCAL_RUN"] = "true"
		e.em.mu.Lock()
		e.em.names[job.ID] = job.JobName
		e.em.mu.Unlock()
		e.em.printf("[%s] job started\n", job.JobName)
		if err := e.tr.JobStarted(ctx, id, "local", time.Now()); err != nil {
			return nil, err
		}
		if msg.JobCredential, err = e.blobs.credential(ctx, id); err != nil {
			return nil, err
		}
		res := e.r.Run(ctx, msg)
		text := string(res.State)
		if res.Error != "" {
			text += ": " + res.Error
		}
		e.em.printf("[%s] job %s (%s)\n", job.JobName, text, res.Duration.Round(time.Millisecond))
		if len(res.Outputs) > 0 {
			if err := e.st.PutJobOutputs(ctx, id, res.Outputs); err != nil {
				return nil, err
			}
		}
		if err := e.tr.JobFinished(context.WithoutCancel(ctx), id, res.State, res.Error, time.Now()); err != nil {
			return nil, err
		}
	}
	return e.st.ListJobs(context.WithoutCancel(ctx), run.ID)
}

// printf writes one line between the runner's messages.
func (e *printEmitter) printf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fmt.Fprintf(e.w, format, args...)
}
