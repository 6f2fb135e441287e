package status

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestJobTransitions checks the job table move by move: what the tracker,
// dispatch, runctl and the approval gate do, and what must never happen.
func TestJobTransitions(t *testing.T) {
	allowed := [][2]Job{
		{JobPending, JobQueued}, {JobPending, JobHeld}, {JobPending, JobRunning},
		{JobPending, JobSkipped}, {JobPending, JobFailed}, {JobPending, JobCancelled},
		{JobQueued, JobRunning}, {JobQueued, JobCancelled}, {JobQueued, JobHeld},
		{JobHeld, JobPending}, {JobHeld, JobCancelled},
		{JobRunning, JobRecovering}, {JobRunning, JobCancelling}, {JobRunning, JobSuccess},
		{JobRunning, JobTimedOutStale}, {JobRecovering, JobRunning}, {JobRecovering, JobFailed},
		{JobCancelling, JobCancelled}, {JobCancelling, JobTimedOutStale},
		// A live status may be rewritten (e.g. a new pending reason).
		{JobPending, JobPending}, {JobQueued, JobQueued}, {JobHeld, JobHeld},
	}
	for _, m := range allowed {
		if !m[0].CanMoveTo(m[1]) {
			t.Errorf("%s → %s refused, want allowed", m[0], m[1])
		}
	}
	refused := [][2]Job{
		{JobQueued, JobPending}, {JobRunning, JobQueued}, {JobRunning, JobPending},
		{JobHeld, JobRunning}, {JobCancelling, JobRunning}, {JobRecovering, JobQueued},
		{JobPending, "bogus"}, {"bogus", JobFailed},
	}
	for _, term := range TerminalJobs() {
		// Nothing leaves a terminal status, not even to itself.
		for _, to := range []Job{JobPending, JobRunning, JobSuccess, JobFailed, term} {
			refused = append(refused, [2]Job{term, to})
		}
	}
	for _, m := range refused {
		if m[0].CanMoveTo(m[1]) {
			t.Errorf("%s → %s allowed, want refused", m[0], m[1])
		}
	}
}

// TestRunTransitions checks the run table: held comes and goes, cancelling
// only ends, terminal never changes.
func TestRunTransitions(t *testing.T) {
	for _, m := range [][2]Run{
		{RunPending, RunRunning}, {RunPending, RunHeld}, {RunRunning, RunHeld},
		{RunHeld, RunPending}, {RunHeld, RunRunning}, {RunHeld, RunCancelling},
		{RunRunning, RunCancelling}, {RunCancelling, RunCancelled}, {RunRunning, RunFailed},
	} {
		if !m[0].CanMoveTo(m[1]) {
			t.Errorf("%s → %s refused, want allowed", m[0], m[1])
		}
	}
	for _, m := range [][2]Run{
		{RunCancelling, RunRunning}, {RunCancelling, RunHeld}, {RunRunning, RunPending},
		{RunSuccess, RunFailed}, {RunFailed, RunRunning}, {RunCancelled, RunCancelled},
	} {
		if m[0].CanMoveTo(m[1]) {
			t.Errorf("%s → %s allowed, want refused", m[0], m[1])
		}
	}
}

// TestStepTransitions: a replayed "running" never overwrites a terminal step.
func TestStepTransitions(t *testing.T) {
	if !StepPending.CanMoveTo(StepRunning) || !StepRunning.CanMoveTo(StepFailed) || !StepPending.CanMoveTo(StepSkipped) {
		t.Error("a live step cannot move forward")
	}
	for _, term := range TerminalSteps() {
		if term.CanMoveTo(StepRunning) {
			t.Errorf("terminal step %s may go back to running", term)
		}
	}
	if StepRunning.CanMoveTo(StepPending) {
		t.Error("running → pending allowed")
	}
}

// TestMovingTo pins the "from" sets the tracker and runctl use in their
// conditional updates.
func TestMovingTo(t *testing.T) {
	cases := []struct {
		got, want []string
	}{
		{Strings(JobsMovingTo(JobRunning)), []string{"pending", "queued", "recovering"}},
		{Strings(JobsMovingTo(JobCancelling)), []string{"recovering", "running"}},
		{Strings(RunsMovingTo(RunRunning)), []string{"held", "pending"}},
		{Strings(RunsMovingTo(RunCancelling)), []string{"held", "pending", "running"}},
	}
	for i, c := range cases {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("case %d: got %v, want %v", i, c.got, c.want)
		}
	}
}

// TestWireWords keeps KiCI's persisted words: JSON values and the terminal
// sets in KiCI's order.
func TestWireWords(t *testing.T) {
	b, err := json.Marshal(struct {
		R Run  `json:"r"`
		J Job  `json:"j"`
		S Step `json:"s"`
	}{RunCancelling, JobTimedOutStale, StepSkipped})
	if err != nil || string(b) != `{"r":"cancelling","j":"timed_out_stale","s":"skipped"}` {
		t.Fatalf("json = %s, %v", b, err)
	}
	if got := Strings(TerminalJobs()); !slices.Equal(got, []string{"success", "failed", "cancelled", "skipped", "timed_out_stale", "drift_dropped"}) {
		t.Errorf("terminal jobs = %v", got)
	}
	if got := Strings(TerminalRuns()); !slices.Equal(got, []string{"success", "failed", "cancelled"}) {
		t.Errorf("terminal runs = %v", got)
	}
	if got := Strings(TerminalSteps()); !slices.Equal(got, []string{"success", "failed", "skipped", "cancelled"}) {
		t.Errorf("terminal steps = %v", got)
	}
	// The terminal lists are copies: changing one changes nothing here.
	TerminalJobs()[0] = "x"
	if !JobSuccess.IsTerminal() {
		t.Error("a caller's edit changed the terminal set")
	}
	for _, w := range FilterWords() {
		if !Run(w).Known() && !Job(w).Known() && w != Unroutable {
			t.Errorf("filter word %q is no status", w)
		}
	}
}
