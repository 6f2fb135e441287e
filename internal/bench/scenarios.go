package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"kici.dev/kici/internal/runs/status"
)

type jobView struct {
	JobID       string     `json:"jobId"`
	Status      status.Job `json:"status"`
	StartedAt   *time.Time `json:"startedAt"`
	CompletedAt *time.Time `json:"completedAt"`
	Steps       []struct {
		Status      status.Step `json:"status"`
		StartedAt   *time.Time  `json:"startedAt"`
		CompletedAt *time.Time  `json:"completedAt"`
	} `json:"steps"`
}

type runView struct {
	RunID  string     `json:"runId"`
	Status status.Run `json:"status"`
}

// runOf waits for the run of a delivery and returns it.
func (o *orch) runOf(ctx context.Context, delivery string) (runView, error) {
	for {
		var list struct {
			Runs []runView `json:"runs"`
		}
		if err := o.get("/api/v1/admin/runs?deliveryId="+delivery, &list); err != nil {
			return runView{}, err
		}
		if len(list.Runs) > 0 {
			return list.Runs[0], nil
		}
		select {
		case <-ctx.Done():
			return runView{}, fmt.Errorf("no run for delivery %s: %w", delivery, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// jobs returns a run's jobs with their steps.
func (o *orch) jobs(runID string) ([]jobView, error) {
	var list struct {
		Jobs []jobView `json:"jobs"`
	}
	err := o.get("/api/v1/admin/runs/"+runID+"/jobs?includeSteps=true", &list)
	return list.Jobs, err
}

// waitTerminal waits until every job of the run is terminal.
func (o *orch) waitTerminal(ctx context.Context, runID string) ([]jobView, error) {
	for {
		js, err := o.jobs(runID)
		if err != nil {
			return nil, err
		}
		done := len(js) > 0
		for _, j := range js {
			if !j.Status.IsTerminal() {
				done = false
			}
		}
		if done {
			return js, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("run %s not finished: %w", runID, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// triggerToStep pushes to lat n times, one after the other, and returns
// the time from sending the webhook to the first step's start, per push.
func triggerToStep(ctx context.Context, o *orch, s *source, sha string, n int) ([]time.Duration, error) {
	return triggerToStepOn(ctx, o, s, sha, "lat", n)
}

// triggerToStepOn is triggerToStep on branch (a one-job workflow's).
func triggerToStepOn(ctx context.Context, o *orch, s *source, sha, branch string, n int) ([]time.Duration, error) {
	var out []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		id, _, err := o.push(s, "refs/heads/"+branch, sha, sha)
		if err != nil {
			return nil, err
		}
		r, err := o.runOf(ctx, id)
		if err != nil {
			return nil, err
		}
		for {
			js, err := o.jobs(r.RunID)
			if err != nil {
				return nil, err
			}
			if len(js) == 1 && len(js[0].Steps) > 0 && js[0].Steps[0].StartedAt != nil {
				out = append(out, js[0].Steps[0].StartedAt.Sub(t0))
				break
			}
			if len(js) == 1 && js[0].Status.IsTerminal() {
				return nil, fmt.Errorf("job of run %s ended %s before its first step started (see the orchestrator and agent logs)", r.RunID, js[0].Status)
			}
			if ctx.Err() != nil {
				return nil, fmt.Errorf("step of run %s never started: %w", r.RunID, ctx.Err())
			}
			time.Sleep(2 * time.Millisecond)
		}
		if _, err := o.waitTerminal(ctx, r.RunID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// burst posts n deliveries with conc senders, spread over refs branches
// of prefix (a push's deliveries are processed in order per ref, so one
// ref would measure one stream, not the pipeline). It returns every
// accept latency and the wall time of the burst.
func burst(o *orch, s *source, prefix, sha string, n, conc, refs int) ([]time.Duration, time.Duration, error) {
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	next := make(chan int)
	start := time.Now()
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				_, took, err := o.push(s, fmt.Sprintf("refs/heads/%s-%d", prefix, i%refs), sha, sha)
				lat[i] = took
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return lat, time.Since(start), firstErr
}

// shellFloor runs what a trivial job costs without kici: the same
// checkout (init, shallow fetch of the commit, detached checkout) and the
// step, n times, conc at a time.
func shellFloor(repo, sha string, n, conc int) (time.Duration, error) {
	dir, err := os.MkdirTemp("", "kici-bench-floor")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	script := `set -e; d="$1/$2"; git init -q "$d"; cd "$d"; git fetch -q --no-tags --depth 1 "file://$3" "$4"; git checkout -q --detach "$4"; true; cd /; rm -rf "$d"`
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			cmd := exec.Command("sh", "-c", script, "sh", dir, fmt.Sprint(i), repo, sha)
			cmd.Env = append(cleanEnv(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
			if out, err := cmd.CombinedOutput(); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("shell floor: %v: %s", err, out)
				}
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	return time.Since(start), firstErr
}

// trivialRuns pushes n trivial runs at once, 8 at a time over 8 branches
// of prefix ("triv" for spawned agents, "stat" for static ones), and waits
// for all of them to succeed.
func trivialRuns(ctx context.Context, o *orch, s *source, prefix, sha string, n int) (time.Duration, error) {
	before, err := o.runsTotal(string(status.RunSuccess))
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if _, _, err := burst(o, s, prefix, sha, n, 8, 8); err != nil {
		return 0, err
	}
	if err := o.waitRuns(ctx, string(status.RunSuccess), before+n); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// fanOut runs the fan workflow (one run, many matrix legs) and returns the
// time from the push to the last leg's end.
func fanOut(ctx context.Context, o *orch, s *source, sha string) (time.Duration, int, error) {
	start := time.Now()
	id, _, err := o.push(s, "refs/heads/fan", sha, sha)
	if err != nil {
		return 0, 0, err
	}
	r, err := o.runOf(ctx, id)
	if err != nil {
		return 0, 0, err
	}
	js, err := o.waitTerminal(ctx, r.RunID)
	if err != nil {
		return 0, 0, err
	}
	return time.Since(start), len(js), nil
}

// logResult is what the log scenario measured.
type logResult struct {
	printed, stored int
	perSecond       float64
	firstPage       time.Duration
	lastPage        time.Duration
	status          string
}

// logRun runs the log workflow (one step printing lines), then reads the
// whole log back page by page, timing the first and the last page.
func logRun(ctx context.Context, o *orch, s *source, sha string, printed int) (logResult, error) {
	res := logResult{printed: printed}
	id, _, err := o.push(s, "refs/heads/log", sha, sha)
	if err != nil {
		return res, err
	}
	r, err := o.runOf(ctx, id)
	if err != nil {
		return res, err
	}
	js, err := o.waitTerminal(ctx, r.RunID)
	if err != nil {
		return res, err
	}
	j := js[0]
	res.status = string(j.Status)
	if len(j.Steps) > 0 && j.Steps[0].StartedAt != nil && j.CompletedAt != nil {
		res.perSecond = float64(printed) / j.CompletedAt.Sub(*j.Steps[0].StartedAt).Seconds()
	}
	const page = 1000
	base := "/api/v1/admin/runs/" + r.RunID + "/jobs/" + j.JobID + "/steps/0/logs?limit=" + fmt.Sprint(page) + "&cursor="
	var pages []time.Duration
	cursor := 0
	for {
		var p struct {
			Lines      []struct{} `json:"lines"`
			NextCursor int        `json:"nextCursor"`
		}
		t0 := time.Now()
		if err := o.get(base+fmt.Sprint(cursor), &p); err != nil {
			return res, err
		}
		pages = append(pages, time.Since(t0))
		res.stored += len(p.Lines)
		if len(p.Lines) == 0 || p.NextCursor == cursor {
			break
		}
		cursor = p.NextCursor
	}
	if len(pages) >= 2 {
		// The last read is the empty end-of-log page; time the last full one.
		res.firstPage = medianOf(repeatGet(o, base+"0", 5))
		lastCursor := max(0, res.stored-page)
		res.lastPage = medianOf(repeatGet(o, base+fmt.Sprint(lastCursor), 5))
	}
	return res, nil
}

func repeatGet(o *orch, path string, n int) []time.Duration {
	var out []time.Duration
	for i := 0; i < n; i++ {
		var v map[string]any
		t0 := time.Now()
		if o.get(path, &v) == nil {
			out = append(out, time.Since(t0))
		}
	}
	return out
}

func medianOf(ds []time.Duration) time.Duration { return percentile(ds, 50) }

// percentile is the p-th percentile (nearest rank) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// dataDir makes a fresh directory under root.
func dataDir(root, name string) (string, error) {
	d := filepath.Join(root, name)
	return d, os.MkdirAll(d, 0o700)
}
