// Package status is the one definition of KiCI's run, job and step states
// and of the moves allowed between them. Every package that reads or writes
// a status (the tracker, the store, dispatch, the agent, the lock-file
// compiler, the CLI) uses these types, so a status word is spelled once.
//
// It is a leaf package: it imports nothing of kici, so the agent and the
// lock-file compiler can use it without linking server code.
//
// The words are KiCI's persisted and wire vocabulary (see
// docs/kici-compatibility.md#runs-and-statuses); their JSON and SQL values are the plain strings.
package status

import "slices"

// Run is a workflow run's status (execution_runs.status).
type Run string

// Run statuses.
const (
	// RunPending: created, no job started yet.
	RunPending Run = "pending"
	// RunRunning: at least one job started.
	RunRunning Run = "running"
	// RunHeld: work waits for an approval, a wait timer or a trust decision
	// and nothing is queued or running.
	RunHeld Run = "held"
	// RunCancelling: a cancel was requested; running jobs are being stopped.
	RunCancelling Run = "cancelling"
	// RunSuccess: every job ended without failure or cancellation.
	RunSuccess Run = "success"
	// RunFailed: a job failed, went stale or was drift-dropped.
	RunFailed Run = "failed"
	// RunCancelled: no job failed and one was cancelled.
	RunCancelled Run = "cancelled"
)

// Job is one job's (one matrix leg's) status (execution_jobs.status), also
// the agent's job state on the wire and the words of a need's runOn set.
type Job string

// Job statuses.
const (
	// JobPending: waiting for its needs (or for a gate).
	JobPending Job = "pending"
	// JobQueued: released to dispatch, waiting for an agent.
	JobQueued Job = "queued"
	// JobHeld: waiting for an approval, a wait timer or a trust decision.
	JobHeld Job = "held"
	// JobRunning: an agent started it.
	JobRunning Job = "running"
	// JobRecovering: its agent disconnected; waiting for it to come back.
	JobRecovering Job = "recovering"
	// JobCancelling: a cancel was sent to its agent.
	JobCancelling Job = "cancelling"
	// JobSuccess: every step succeeded.
	JobSuccess Job = "success"
	// JobFailed: a step failed, the job timed out or was rejected.
	JobFailed Job = "failed"
	// JobCancelled: cancelled before or while running.
	JobCancelled Job = "cancelled"
	// JobSkipped: its condition was false or an upstream ended outside the
	// need's runOn set.
	JobSkipped Job = "skipped"
	// JobTimedOutStale: its agent stopped reporting and never came back.
	JobTimedOutStale Job = "timed_out_stale"
	// JobDriftDropped: dropped because the lock file changed under it.
	JobDriftDropped Job = "drift_dropped"
)

// Step is one step's status (execution_steps.status and the agent's step
// state on the wire).
type Step string

// Step statuses.
const (
	StepPending   Step = "pending"
	StepRunning   Step = "running"
	StepSuccess   Step = "success"
	StepFailed    Step = "failed"
	StepSkipped   Step = "skipped"
	StepCancelled Step = "cancelled"
)

// Terminal statuses, in KiCI's order. A terminal status never changes again.
var (
	terminalRuns  = []Run{RunSuccess, RunFailed, RunCancelled}
	terminalJobs  = []Job{JobSuccess, JobFailed, JobCancelled, JobSkipped, JobTimedOutStale, JobDriftDropped}
	terminalSteps = []Step{StepSuccess, StepFailed, StepSkipped, StepCancelled}
)

// Moves between live (non-terminal) statuses. Besides these, every live
// status may move to every terminal status (a job can be reported, skipped,
// cancelled or lost at any point; a run completes whenever its last job
// ends) and to itself (a rewrite of other fields, e.g. a pending reason).
var (
	runMoves = map[Run][]Run{
		RunPending:    {RunRunning, RunHeld, RunCancelling},
		RunRunning:    {RunHeld, RunCancelling},
		RunHeld:       {RunPending, RunRunning, RunCancelling},
		RunCancelling: {},
	}
	jobMoves = map[Job][]Job{
		JobPending:    {JobQueued, JobHeld, JobRunning},
		JobQueued:     {JobHeld, JobRunning},
		JobHeld:       {JobPending},
		JobRunning:    {JobRecovering, JobCancelling},
		JobRecovering: {JobRunning, JobCancelling},
		JobCancelling: {},
	}
	stepMoves = map[Step][]Step{
		StepPending: {StepRunning},
		StepRunning: {},
	}
)

// TerminalRuns returns the terminal run statuses (a fresh slice).
func TerminalRuns() []Run { return slices.Clone(terminalRuns) }

// TerminalJobs returns the terminal job statuses (a fresh slice).
func TerminalJobs() []Job { return slices.Clone(terminalJobs) }

// TerminalSteps returns the terminal step statuses (a fresh slice).
func TerminalSteps() []Step { return slices.Clone(terminalSteps) }

// IsTerminal reports whether the run status never changes again.
func (s Run) IsTerminal() bool { return slices.Contains(terminalRuns, s) }

// IsTerminal reports whether the job status never changes again.
func (s Job) IsTerminal() bool { return slices.Contains(terminalJobs, s) }

// IsTerminal reports whether the step status never changes again.
func (s Step) IsTerminal() bool { return slices.Contains(terminalSteps, s) }

// Known reports whether s is a run status of KiCI's vocabulary.
func (s Run) Known() bool { _, live := runMoves[s]; return live || s.IsTerminal() }

// Known reports whether s is a job status of KiCI's vocabulary.
func (s Job) Known() bool { _, live := jobMoves[s]; return live || s.IsTerminal() }

// Known reports whether s is a step status of KiCI's vocabulary.
func (s Step) Known() bool { _, live := stepMoves[s]; return live || s.IsTerminal() }

// CanMoveTo reports whether a run in status s may be moved to `to`.
func (s Run) CanMoveTo(to Run) bool { return canMove(runMoves, s, to, Run.IsTerminal, Run.Known) }

// CanMoveTo reports whether a job in status s may be moved to `to`.
func (s Job) CanMoveTo(to Job) bool { return canMove(jobMoves, s, to, Job.IsTerminal, Job.Known) }

// CanMoveTo reports whether a step in status s may be moved to `to`.
func (s Step) CanMoveTo(to Step) bool { return canMove(stepMoves, s, to, Step.IsTerminal, Step.Known) }

// RunsMovingTo returns, sorted by word, every other run status that may
// move to `to` — the "from" set of a conditional update to `to`.
func RunsMovingTo(to Run) []Run { return sources(runMoves, to, Run.CanMoveTo) }

// JobsMovingTo returns, sorted by word, every other job status that may
// move to `to` — the "from" set of a conditional update to `to`.
func JobsMovingTo(to Job) []Job { return sources(jobMoves, to, Job.CanMoveTo) }

// Strings converts statuses to their plain words (for SQL arguments and
// string-typed wire fields).
func Strings[S ~string](list []S) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = string(s)
	}
	return out
}

func canMove[S ~string](moves map[S][]S, from, to S, terminal, known func(S) bool) bool {
	live, ok := moves[from]
	if !ok || !known(to) {
		return false // from is terminal or unknown; to is unknown
	}
	return from == to || terminal(to) || slices.Contains(live, to)
}

// sources lists the other live statuses (sorted by word, so the order is
// stable) that may move to `to`. `to` itself is left out: a conditional
// update from a list including `to` would report a rewrite as a move.
func sources[S ~string](moves map[S][]S, to S, can func(S, S) bool) []S {
	var out []S
	for from := range moves {
		if from != to && can(from, to) {
			out = append(out, from)
		}
	}
	slices.Sort(out)
	return out
}

// Unroutable is a status word of KiCI's run-list filter (KiCI RUN_STATUSES)
// that kici never writes: an unroutable job stays queued with a pending
// reason. Filtering by it matches no row.
const Unroutable = "unroutable"

// FilterWords returns the canonical status union accepted by a run-list
// status filter (KiCI RUN_STATUSES): run statuses, then the job-only words,
// which simply match no run row.
func FilterWords() []string {
	return []string{
		string(RunPending), string(RunRunning), string(RunHeld), string(RunCancelling),
		string(RunSuccess), string(RunFailed), string(RunCancelled),
		string(JobQueued), string(JobRecovering), string(JobSkipped), Unroutable,
		string(JobTimedOutStale), string(JobDriftDropped),
	}
}
