package forgestatus

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/store"
)

// GitHub check-run statuses and conclusions (GitHub REST "Check runs").
const (
	checkQueued     = "queued"
	checkInProgress = "in_progress"
	checkCompleted  = "completed"

	conclusionSuccess        = "success"
	conclusionFailure        = "failure"
	conclusionCancelled      = "cancelled"
	conclusionSkipped        = "skipped"
	conclusionTimedOut       = "timed_out"
	conclusionActionRequired = "action_required"
	conclusionNeutral        = "neutral"
)

// Commit-status states. GitHub and Gitea share pending/success/failure/
// error; GitLab has its own words (pending, running, success, failed,
// canceled, skipped), mapped in gitlabState.
const (
	statePending = "pending"
	stateSuccess = "success"
	stateFailure = "failure"
	stateError   = "error"
)

// maxDescription is GitHub's limit on a commit status description.
const maxDescription = 140

// maxOutputText bounds a check run's output summary and text (GitHub
// allows 65535 characters each).
const maxOutputText = 60000

// jobView is what the reporter knows about one job when it computes the
// state to show.
type jobView struct {
	run   *store.Run
	job   *store.Job
	steps []*store.Step
	all   []*store.Job // every job of the run, for the summary
	// hold is the job's (or its run's) pending hold, nil when none.
	hold *store.HeldRun
	// failLines are the last log lines (masked as stored) of failStep,
	// the failing step, or with live the running one.
	failLines []string
	failStep  string
	live      bool
	now       time.Time
}

// outcome is a job's state in the forge's terms: the check-run status and
// conclusion, the commit-status state, and one sentence saying what
// happened.
type outcome struct {
	status, conclusion string
	state              string
	terminal           bool
	sentence           string
}

// outcomeOf maps a job (and its hold) to what the forge shows.
func outcomeOf(v *jobView) outcome {
	j := v.job
	switch j.Status {
	case status.JobHeld:
		reason := holdSentence(v)
		if v.hold != nil && (v.hold.HoldType == hold.Timer || v.hold.HoldType == hold.Concurrency) {
			return outcome{status: checkQueued, state: statePending, sentence: reason}
		}
		// Waiting for a person: GitHub shows "Action required".
		return outcome{status: checkCompleted, conclusion: conclusionActionRequired, state: statePending, sentence: reason, terminal: true}
	case status.JobPending, status.JobQueued:
		s := string(status.JobQueued)
		if j.PendingReason != "" {
			s = "queued: " + j.PendingReason
		}
		return outcome{status: checkQueued, state: statePending, sentence: s}
	case status.JobRunning, status.JobRecovering, status.JobCancelling:
		return outcome{status: checkInProgress, state: statePending, sentence: string(status.JobRunning)}
	case status.JobSuccess:
		return outcome{status: checkCompleted, conclusion: conclusionSuccess, state: stateSuccess, terminal: true,
			sentence: "succeeded" + tookText(j)}
	case status.JobCancelled:
		return outcome{status: checkCompleted, conclusion: conclusionCancelled, state: stateError, terminal: true,
			sentence: string(j.Status) + reasonText(j.ErrorMessage)}
	case status.JobSkipped:
		return outcome{status: checkCompleted, conclusion: conclusionSkipped, state: skippedState(j, v.all), terminal: true,
			sentence: string(j.Status) + reasonText(j.ErrorMessage)}
	case status.JobTimedOutStale:
		return outcome{status: checkCompleted, conclusion: conclusionTimedOut, state: stateFailure, terminal: true,
			sentence: "timed out: the agent stopped reporting" + reasonText(j.ErrorMessage)}
	}
	// failed, drift_dropped and anything unknown and terminal.
	if timedOut(v) {
		return outcome{status: checkCompleted, conclusion: conclusionTimedOut, state: stateFailure, terminal: true,
			sentence: "timed out" + failedStepText(v)}
	}
	return outcome{status: checkCompleted, conclusion: conclusionFailure, state: stateFailure, terminal: true,
		sentence: string(status.JobFailed) + failedStepText(v)}
}

// skippedState: a job skipped because an upstream failed or was cancelled
// (directly, or through a chain of jobs skipped for that reason) is an
// error, so a required status never turns green over a failure. A job
// skipped by its own condition, or because its `needs` edge did not fire
// on a passing upstream (`when: on-failure` after a success), passes.
func skippedState(j *store.Job, all []*store.Job) string {
	if upstreamBroke(j, all, len(all)+1) {
		return stateError
	}
	return stateSuccess
}

// upstreamBroke reports whether a skipped job's unmet upstream (named in
// its "upstream_unmet: <job> (<status>)" reason) failed, was cancelled or
// is missing, following skipped upstreams through all. depth bounds the
// walk (needs form a DAG; the bound only guards bad rows).
func upstreamBroke(j *store.Job, all []*store.Job, depth int) bool {
	rest, ok := strings.CutPrefix(j.ErrorMessage, runs.UpstreamUnmetPrefix)
	if !ok || depth <= 0 {
		return false
	}
	i := strings.LastIndex(rest, " (")
	if i < 0 || !strings.HasSuffix(rest, ")") {
		return true // an unreadable reason: keep the safe answer
	}
	name, st := rest[:i], status.Job(rest[i+2:len(rest)-1])
	switch st {
	case status.JobSuccess:
		return false
	case status.JobSkipped:
		for _, up := range all {
			if up.JobName == name && up.Status == status.JobSkipped {
				return upstreamBroke(up, all, depth-1)
			}
		}
		return false
	}
	return true // failed, cancelled, timed_out_stale, drift_dropped, missing
}

// timedOut reports whether a failed job ended on a time limit: its own
// (job_timeout), its run's (workflow_timeout) or a step's.
func timedOut(v *jobView) bool {
	if strings.HasPrefix(v.job.ErrorMessage, "job_timeout: ") || strings.HasPrefix(v.job.ErrorMessage, "workflow_timeout: ") {
		return true
	}
	for _, s := range v.steps {
		if s.Status == status.StepFailed && strings.Contains(s.ErrorMessage, "timed out") {
			return true
		}
	}
	return false
}

func tookText(j *store.Job) string {
	if j.DurationMs == nil {
		return ""
	}
	return " in " + dur(*j.DurationMs)
}

func reasonText(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

// failedStepText names the failing step and how it ended.
func failedStepText(v *jobView) string {
	for _, s := range v.steps {
		if s.Status != status.StepFailed {
			continue
		}
		t := fmt.Sprintf(": step %q", s.StepName)
		switch {
		case s.ExitCode != nil && (s.ErrorMessage == "" || strings.HasPrefix(s.ErrorMessage, "exit code")):
			t += fmt.Sprintf(" exited with %d", *s.ExitCode)
		case s.ErrorMessage != "":
			t += " " + s.ErrorMessage
		}
		return t
	}
	return reasonText(v.job.ErrorMessage)
}

// holdSentence says why a held job waits, in words, and how to release it.
func holdSentence(v *jobView) string {
	h := v.hold
	if h == nil {
		return "held: " + v.job.PendingReason
	}
	switch {
	case h.Reason == hold.ReasonForkPR:
		who := v.run.TriggeredBy
		if who == "" {
			who = "an unknown author"
		}
		return fmt.Sprintf("fork pull request from %s waits for approval: comment `/kici approve %s` or run `kici-admin held-run approve %s`", who, v.run.ID, h.ID)
	case h.HoldType == hold.Timer:
		return "waiting for the wait timer of " + strings.Join(h.Contexts, ", ") + " (until " + h.ExpiresAt.UTC().Format(time.RFC3339) + ")"
	case h.HoldType == hold.Concurrency:
		return "waiting for a free slot of concurrency group " + h.Group
	}
	reason := h.Reason
	if reason == hold.ReasonContextTrust {
		reason = "context trust requires approval"
	}
	return fmt.Sprintf("waits for approval (%s): run `kici-admin held-run approve %s`", reason, h.ID)
}

// dur renders milliseconds as "850ms", "12s" or "3m05s".
func dur(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", ms)
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// truncateWords cuts s to at most n bytes at a word boundary, marking the
// cut with "…": a commit status description (GitHub, Gitea: 140
// characters) reads "failed: step "test" exited…", never "exi…". A single
// word longer than half of n is cut inside, on a rune boundary.
func truncateWords(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := truncate(s, n)
	cut = cut[:len(cut)-len("…")]
	if next := s[len(cut)]; next == ' ' || next == '\t' {
		// The cut falls between two words already.
	} else if i := strings.LastIndexAny(cut, " \t"); i >= n/2 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " \t,;:") + "…"
}

// hashOf identifies a request body: the same hash means nothing new to send.
func hashOf(body map[string]any) (json.RawMessage, string) {
	b, _ := json.Marshal(body)
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:12])
}
