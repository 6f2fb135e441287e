// Package runner executes one dispatched job on the agent host: a fresh work
// directory, checkout, shell steps in their own process groups, log
// streaming, heartbeats and status reporting
// (see docs/kici-compatibility.md#agent and #runs-and-statuses).
package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/agent/checkout"
	"kici.dev/kici/internal/agent/logstream"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/protocol"
)

// JobLogStep is the StepIndex of the job-level log bucket (checkout, setup).
const JobLogStep = -1

// TypeScriptStepError is the error of a step without `run`.
const TypeScriptStepError = "TypeScript steps need the KiCI Node agent"

// Defaults for zero Options fields.
const (
	DefaultStepTimeout       = 30 * time.Minute
	DefaultHeartbeatInterval = 60 * time.Second
	DefaultMaxLogBytes       = 10 << 20
	// DefaultTimeoutGrace is the SIGTERM→SIGKILL window after a step
	// timeout.
	DefaultTimeoutGrace = 5 * time.Second
	// DefaultCancelGrace is the SIGTERM→SIGKILL window of a graceful cancel
	// when the job sets no gracePeriod.
	DefaultCancelGrace = 10 * time.Second
	// MaxCancelGrace caps a job's gracePeriod (KiCI agent maximum, 30 s).
	MaxCancelGrace = 30 * time.Second
	// CleanupStepTimeout caps each attempt of a step that runs after the
	// job was stopped (cancel or job timeout); KiCI's per-hook default.
	CleanupStepTimeout = 5 * time.Minute
)

// Emitter sends protocol messages to the orchestrator. Send must not block
// for long and must keep the order of calls (conn.Client does).
type Emitter interface {
	Send(msg any)
}

// Options configures a Runner. Zero fields take the defaults above.
type Options struct {
	// WorkRoot is the parent of per-job work directories (os.TempDir()
	// when empty).
	WorkRoot string
	// HostEnv is the agent's environment (os.Environ()); only allowlisted
	// entries reach steps (envbuild.HostAllowlist).
	HostEnv []string
	// DefaultStepTimeout applies to steps without a timeout.
	DefaultStepTimeout time.Duration
	// HeartbeatInterval is the job.heartbeat period.
	HeartbeatInterval time.Duration
	// MaxLogBytes is the per-step log cap unless the dispatch sets one.
	MaxLogBytes int64
	// TimeoutGrace is the SIGTERM→SIGKILL window after a step timeout.
	TimeoutGrace time.Duration
	// CancelGrace is the graceful-cancel window when the job sets no
	// gracePeriod.
	CancelGrace time.Duration
	// CheckoutTimeout bounds the checkout (checkout.DefaultTimeout if 0).
	CheckoutTimeout time.Duration
	// Credentials are the agent's own secrets (its token): masked in every
	// job's log like the job's secrets.
	Credentials []string
	// Blobs configures caches, artifacts and the per-job HOME (blobs.go).
	Blobs BlobOptions
	// Attest sends provenance.attest for the running job; nil disables
	// `attest:` steps and the step attestation channel (attest.go).
	Attest AttestFunc
	// Logger receives runner diagnostics (discarded when nil).
	Logger *slog.Logger
	// Supervisor is the command prefix running each step under the step
	// supervisor ([kici-step-supervisor] or [kici-agent, SupervisorArg];
	// supervise.go): the step's processes then die with the agent, even a
	// SIGKILLed one. Empty runs steps directly (the shell itself still dies
	// with the agent).
	Supervisor []string
	// AgentBinary is the agent's own executable, re-executed as a
	// container job's reaper (containerreaper.go); "" runs no reaper.
	AgentBinary string
	// StepUser, when set, is the identity steps run as (stepuser.go).
	StepUser *StepUser
	// UIDs, when set, gives each job a uid of its own instead of StepUser
	// (uidpool.go); the agent must be root.
	UIDs *UIDPool
	// InPod is set when the agent runs inside the job's own container of a
	// Kubernetes pod (KICI_AGENT_JOB_CONTAINER=pod): a job's `container:`
	// is this one and its services are the pod's (podcontainer.go), so no
	// Docker Engine is used.
	InPod bool
	// RefuseUntrusted, when set, fails every job marked untrusted (a fork
	// pull request) with this reason before anything runs: the agent
	// cannot keep such a job's steps away from its host (confine.go).
	RefuseUntrusted string
}

// Result is the outcome of a job, as sent in its terminal job.status.
type Result struct {
	// State is success, failed or cancelled.
	State status.Job
	// Error explains a failed or cancelled job ("" on success).
	Error string
	// Duration is the job's wall-clock time.
	Duration time.Duration
	// Steps has one entry per lock step, in order.
	Steps []protocol.StepResult
	// Outputs are the job's declared outputs the steps wrote (outputs.go).
	Outputs map[string]string
}

// Runner runs jobs, one Run call per job. It is safe for concurrent use;
// Cancel may be called from any goroutine.
type Runner struct {
	opts Options
	out  Emitter

	mu        sync.Mutex
	jobs      map[string]*job
	precancel map[string]cancelReq
}

// cancelReq is a cancel that arrived before its job started running.
type cancelReq struct {
	reason string
	force  bool
}

// maxPrecancel bounds remembered early cancels.
const maxPrecancel = 16

// New returns a Runner that reports through out.
func New(opts Options, out Emitter) *Runner {
	if opts.WorkRoot == "" {
		opts.WorkRoot = os.TempDir()
	}
	if opts.DefaultStepTimeout <= 0 {
		opts.DefaultStepTimeout = DefaultStepTimeout
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if opts.MaxLogBytes <= 0 {
		opts.MaxLogBytes = DefaultMaxLogBytes
	}
	if opts.TimeoutGrace <= 0 {
		opts.TimeoutGrace = DefaultTimeoutGrace
	}
	if opts.CancelGrace <= 0 {
		opts.CancelGrace = DefaultCancelGrace
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Runner{opts: opts, out: out, jobs: map[string]*job{}, precancel: map[string]cancelReq{}}
}

// stop reasons
const (
	stopNone = iota
	stopCancel
	stopTimeout
)

type job struct {
	r        *Runner
	d        *protocol.JobDispatch
	cfg      lockfile.Job
	masker   *logstream.Masker
	maxLog   int64
	seqMu    sync.Mutex
	seq      int64
	offsets  map[int]int64 // lines emitted per step index (LogChunk.Offset), guarded by seqMu
	ctx      context.Context
	cancel   context.CancelFunc
	stopMu   sync.Mutex
	stopKind int
	reason   string
	stopCh   chan struct{}
	forceCh  chan struct{}
	forced   bool
	grace    time.Duration
	workDir  string
	ident    Identity // identity.go
	view     []string // supervisor view flags (viewFlags)
	srcDir   string
	tmpDir   string
	scripts  string
	hostEnv  []string
	attest   *attestServer
	started  time.Time
	outs     *outputState   // outputs.go
	ctr      *jobContainers // jobcontainer.go; nil runs steps on the host
	pod      *podContainer  // podcontainer.go; set when this pod is the job's container
}

// Active returns the ids of jobs currently running.
func (r *Runner) Active() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.jobs))
	for id := range r.jobs {
		ids = append(ids, id)
	}
	return ids
}

// Cancel stops job jobID: graceful sends SIGTERM to the running step's
// process group, waits the job's grace period (gracePeriod seconds, capped
// at MaxCancelGrace; DefaultCancelGrace when unset) and then SIGKILLs it;
// force, or a second cancel, SIGKILLs at once. Remaining steps are skipped
// and the job ends "cancelled" with reason as its error. It reports whether
// the job was running; a cancel for a job not yet started is remembered and
// applied when Run starts it.
func (r *Runner) Cancel(jobID, reason string, force bool) bool {
	r.mu.Lock()
	j := r.jobs[jobID]
	if j == nil {
		if len(r.precancel) >= maxPrecancel {
			clear(r.precancel)
		}
		r.precancel[jobID] = cancelReq{reason, force}
	}
	r.mu.Unlock()
	if j == nil {
		return false
	}
	j.stop(stopCancel, reason, force)
	return true
}

func (j *job) stop(kind int, reason string, force bool) {
	j.stopMu.Lock()
	defer j.stopMu.Unlock()
	if j.stopKind == stopNone {
		j.stopKind = kind
		j.reason = reason
		close(j.stopCh)
		j.cancel()
	} else if kind == stopCancel {
		force = true // a second cancel escalates
	}
	if force && !j.forced {
		j.forced = true
		close(j.forceCh)
	}
}

func (j *job) stopped() (int, string) {
	j.stopMu.Lock()
	defer j.stopMu.Unlock()
	return j.stopKind, j.reason
}

func now() int64 { return time.Now().UnixMilli() }

// Run executes d to completion and returns its result. It sends, in order:
// job.status running, the checkout log (step -1), per step step.status
// running → log.chunk… → step.status terminal, and the terminal job.status
// with data {durationMs, error, stepResults}; job.heartbeat every
// HeartbeatInterval meanwhile. Cancelling ctx is a graceful cancel with
// reason "agent shutting down". The work directory is always removed.
func (r *Runner) Run(ctx context.Context, d *protocol.JobDispatch) *Result {
	j := &job{r: r, d: d, stopCh: make(chan struct{}), forceCh: make(chan struct{}), started: time.Now()}
	j.ctx, j.cancel = context.WithCancel(context.Background())
	defer j.cancel()

	r.mu.Lock()
	r.jobs[d.JobID] = j
	pre, early := r.precancel[d.JobID]
	delete(r.precancel, d.JobID)
	r.mu.Unlock()
	if early {
		j.stop(stopCancel, pre.reason, pre.force)
	}
	defer func() {
		r.mu.Lock()
		delete(r.jobs, d.JobID)
		r.mu.Unlock()
	}()

	r.out.Send(&protocol.JobStatus{Type: protocol.TypeJobStatus, MessageID: newID(), RunID: d.RunID, JobID: d.JobID, State: status.JobRunning, Timestamp: now()})

	hbDone := make(chan struct{})
	var hbWG sync.WaitGroup
	hbWG.Add(1)
	go func() {
		defer hbWG.Done()
		t := time.NewTicker(r.opts.HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-hbDone:
				return
			case <-t.C:
				r.out.Send(&protocol.JobHeartbeat{Type: protocol.TypeJobHeartbeat, RunID: d.RunID, JobID: d.JobID, Timestamp: now()})
			}
		}
	}()
	// Agent shutdown ⇒ graceful cancel.
	go func() {
		select {
		case <-ctx.Done():
			j.stop(stopCancel, "agent shutting down", false)
		case <-hbDone:
		}
	}()

	res := j.execute()
	close(hbDone)
	hbWG.Wait()
	res.Duration = time.Since(j.started)
	r.out.Send(&protocol.JobStatus{
		Type: protocol.TypeJobStatus, MessageID: newID(), RunID: d.RunID, JobID: d.JobID,
		State: res.State, Timestamp: now(),
		Data: &protocol.JobStatusData{DurationMs: res.Duration.Milliseconds(), Error: res.Error, StepResults: res.Steps, Outputs: res.Outputs},
	})
	return res
}

func (j *job) execute() (res *Result) {
	r, d := j.r, j.d
	res = &Result{State: status.JobFailed}
	jobLog := j.newStream(JobLogStep)
	defer func() { jobLog.Close(); res.Outputs = j.jobOutputs() }()

	if err := json.Unmarshal(d.JobConfig, &j.cfg); err != nil {
		res.Error = "invalid jobConfig: " + err.Error()
		jobLog.AddLine("", "Error: "+res.Error)
		return res
	}
	res.Steps = make([]protocol.StepResult, len(j.cfg.Steps))
	for i, s := range j.cfg.Steps {
		res.Steps[i] = protocol.StepResult{Name: stepName(s, i), Status: status.StepSkipped}
	}
	j.grace = r.opts.CancelGrace
	if j.cfg.GracePeriod > 0 {
		j.grace = min(time.Duration(j.cfg.GracePeriod)*time.Second, MaxCancelGrace)
	}
	if j.cfg.Timeout > 0 {
		limit := time.Duration(j.cfg.Timeout) * time.Millisecond
		t := time.AfterFunc(limit, func() {
			j.stop(stopTimeout, fmt.Sprintf("job_timeout: job exceeded its %s timeout", limit), false)
		})
		defer t.Stop()
	}
	j.maxLog = r.opts.MaxLogBytes
	if d.MaxLogSizeBytes > 0 {
		j.maxLog = d.MaxLogSizeBytes
	}
	j.masker = logstream.NewMasker(j.maskValues())
	jobLog = j.replaceStream(jobLog, JobLogStep)
	if d.SetupError != "" {
		res.Error = j.masker.Mask(d.SetupError)
		jobLog.AddLine("", "Error: "+res.Error)
		j.skipFrom(0, res)
		return res
	}

	// Work directory.
	if err := os.MkdirAll(r.opts.WorkRoot, 0o755); err != nil {
		res.Error = "work directory: " + err.Error()
		jobLog.AddLine("", "Error: "+res.Error)
		j.skipFrom(0, res)
		return res
	}
	jd, err := makeJobDir(r.opts.WorkRoot, d) // jobdir.go: the same path run after run
	if err != nil {
		res.Error = "work directory: " + err.Error()
		jobLog.AddLine("", "Error: "+res.Error)
		j.skipFrom(0, res)
		return res
	}
	wd := jd.Path
	defer func() {
		j.stopContainers() // before the work directory its steps mounted
		if err := removeAll(wd); err != nil {
			r.opts.Logger.Warn("could not remove work directory", "dir", wd, "err", err)
		}
		jd.release()
		j.ident.free() // only once nothing of the job is left to its uid
	}()
	j.workDir = wd
	jobLog.AddLine("", jobDirLine(jd))
	if jd.AsideErr != nil {
		r.opts.Logger.Warn("could not remove a work directory an earlier job left", "dir", jd.Aside, "err", jd.AsideErr)
	}
	j.srcDir = filepath.Join(wd, "src")
	j.tmpDir = filepath.Join(wd, "tmp")
	j.scripts = filepath.Join(wd, "scripts")
	for _, dir := range []string{j.srcDir, j.tmpDir, j.scripts} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			res.Error = "work directory: " + err.Error()
			j.skipFrom(0, res)
			return res
		}
	}

	if err := j.setupHome(); err != nil {
		res.Error = "job home: " + err.Error()
		j.skipFrom(0, res)
		return res
	}
	if err := j.confine(); err != nil { // confine.go
		res.Error = err.Error()
		jobLog.AddLine("", "Error: "+res.Error)
		j.skipFrom(0, res)
		return res
	}

	j.startAttest()
	defer j.stopAttest()
	if j.attest != nil { // its token is a credential too
		j.masker = logstream.NewMasker(j.maskValues())
		jobLog = j.replaceStream(jobLog, JobLogStep)
	}

	// Checkout.
	if j.cfg.Checkout == nil || *j.cfg.Checkout {
		err := checkout.Run(j.ctx, checkout.Options{
			RepoURL: d.RepoURL, SHA: d.SHA, Dir: j.srcDir, Auth: d.SourceAuth,
			Log: func(line string) { jobLog.AddLine("", line) }, Timeout: r.opts.CheckoutTimeout,
			PathEnv: lookupEnv(r.opts.HostEnv, "PATH"),
			// The host's mirror cache lives beside the job directories,
			// shared by every agent of the host that uses this work root.
			MirrorRoot: filepath.Join(r.opts.WorkRoot, "kici-mirrors"),
		})
		if err != nil {
			jobLog.AddLine("", "Error: "+err.Error())
			jobLog.Flush()
			j.finishStopped(res)
			if res.Error == "" {
				res.Error = j.masker.Mask(err.Error())
			}
			j.skipFrom(0, res)
			return res
		}
	} else {
		jobLog.AddLine("", "Checkout disabled for this job")
	}
	if msg := j.checkDrift(jobLog); msg != "" {
		res.Error = msg
		j.skipFrom(0, res)
		return res
	}
	// The checkout and the job's HOME become the step user's first: caches
	// and artifacts are unpacked into them as that user (jobfiles.go).
	var blobs *blobState
	err = j.handOverCheckout() // confine.go
	if err == nil {
		err = j.setupGitCredentials(jobLog) // gitcredentials.go
	}
	if err == nil {
		blobs, err = j.beforeSteps(jobLog)
	}
	if err != nil {
		jobLog.AddLine("", "Error: "+err.Error())
		res.Error = j.masker.Mask(err.Error())
		j.skipFrom(0, res)
		return res
	}
	jobLog.Close()

	// Steps. Each step runs when the job's current state (success, failed,
	// cancelled) is in its runOn set; a forced stop skips everything left.
	var failure string
	for i := range j.cfg.Steps {
		state := j.stepState(failure)
		if state == stateForced || !lockfile.StepRuns(j.cfg.Steps[i].RunOn, state) {
			j.skipFrom(i, res, i+1)
			continue
		}
		if ok, err := j.stepCondition(i, res); err != nil || !ok {
			res.Steps[i] = j.conditionSkip(i, err)
			if err != nil && failure == "" {
				failure = res.Steps[i].Error
			}
			continue
		}
		sr := j.runStep(i, state == lockfile.StepOnCancelled || j.stoppedKind() == stopTimeout)
		res.Steps[i] = sr
		if sr.Status == status.StepFailed && !j.cfg.Steps[i].ContinueOnError && failure == "" {
			failure = fmt.Sprintf("step %q failed: %s", sr.Name, sr.Error)
		}
	}
	j.showServiceLogs() // servicelogs.go
	if err := j.afterSteps(blobs, j.outcome(failure)); err != nil && failure == "" {
		failure = err.Error()
	}
	if j.finishStopped(res) {
		return res
	}
	if failure != "" {
		res.State = status.JobFailed
		res.Error = failure
		return res
	}
	res.State = status.JobSuccess
	return res
}
