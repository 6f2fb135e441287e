package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"kici.dev/kici/internal/execution/status"

	"kici.dev/kici/internal/runstream"
	"kici.dev/kici/internal/store"
)

// StatusFilterValues is the canonical status union accepted by GET /runs
// ?status= (KiCI RUN_STATUSES): run statuses plus job-only statuses, which
// simply match no run row.
var StatusFilterValues = status.FilterWords()

// Page sizes.
const (
	// DefaultRunLimit and MaxRunLimit bound GET /runs ?limit.
	DefaultRunLimit, MaxRunLimit = 20, 100
	// DefaultLogLimit and MaxLogLimit bound the logs route's ?limit.
	DefaultLogLimit, MaxLogLimit = 500, 2000
)

// RunView is a run in API responses.
type RunView struct {
	RunID          string     `json:"runId"`
	WorkflowName   string     `json:"workflowName"`
	Status         status.Run `json:"status"`
	Provider       string     `json:"provider"`
	RepoIdentifier string     `json:"repoIdentifier"`
	RepoURL        string     `json:"repoUrl"`
	Ref            string     `json:"ref"`
	SHA            string     `json:"sha"`
	DeliveryID     *string    `json:"deliveryId"`
	SourceID       *string    `json:"sourceId"`
	OrgID          string     `json:"orgId"`
	TriggeredBy    *string    `json:"triggeredBy"`
	FailureReason  *string    `json:"failureReason"`
	TimeoutMs      *int64     `json:"timeoutMs"`
	CreatedAt      time.Time  `json:"createdAt"`
	StartedAt      *time.Time `json:"startedAt"`
	CompletedAt    *time.Time `json:"completedAt"`
	DurationMs     *int64     `json:"durationMs"`
	// TriggerType and TargetBranch are the run's context-gate facts;
	// TrustTier is "trusted", "unknown" (a fork pull request) or null (a
	// provider without a fork model); LockFileSource is "base" when the
	// lock was read from the base branch (KiCI run fields).
	TriggerType    *string `json:"triggerType"`
	TargetBranch   *string `json:"targetBranch"`
	TrustTier      *string `json:"trustTier"`
	LockFileSource *string `json:"lockFileSource"`
	// ParentRunID is the run a rerun repeats (GET /runs/{runId} and the
	// rerun answer only).
	ParentRunID *string `json:"parentRunId,omitempty"`
}

// JobView is a job in API responses. RoutingReason is the pending reason of
// a queued job. Steps is present only with ?includeSteps=true.
type JobView struct {
	JobID           string            `json:"jobId"`
	RunID           string            `json:"runId"`
	JobName         string            `json:"jobName"`
	BaseJobName     string            `json:"baseJobName"`
	Status          status.Job        `json:"status"`
	MatrixValues    map[string]string `json:"matrixValues"`
	AgentID         *string           `json:"agentId"`
	StartedAt       *time.Time        `json:"startedAt"`
	CompletedAt     *time.Time        `json:"completedAt"`
	DurationMs      *int64            `json:"durationMs"`
	ErrorMessage    *string           `json:"errorMessage"`
	RoutingReason   *string           `json:"routingReason"`
	RunsOnLabels    []string          `json:"runsOnLabels"`
	CreatedAt       time.Time         `json:"createdAt"`
	Needs           []store.Need      `json:"needs"`
	TimeoutMs       *int64            `json:"timeoutMs"`
	LastHeartbeatAt *time.Time        `json:"lastHeartbeatAt"`
	Steps           []StepView        `json:"steps,omitzero"`
	// Outputs are the job's exported outputs (name → value, secrets
	// masked); absent when it exported none.
	Outputs map[string]string `json:"outputs,omitempty"`
}

// StepView is a step in API responses.
type StepView struct {
	StepIndex    int         `json:"stepIndex"`
	StepName     string      `json:"stepName"`
	Status       status.Step `json:"status"`
	ExitCode     *int        `json:"exitCode"`
	ErrorMessage *string     `json:"errorMessage"`
	LogBytes     int64       `json:"logBytes"`
	StartedAt    *time.Time  `json:"startedAt"`
	CompletedAt  *time.Time  `json:"completedAt"`
	DurationMs   *int64      `json:"durationMs"`
}

// LogLineView is one log line: unix-ms timestamp, stream, text.
type LogLineView struct {
	TS     int64  `json:"ts"`
	Stream string `json:"stream"`
	Msg    string `json:"msg"`
}

// LogsPage is the logs route's response. Complete is true when the step (or
// its job) is terminal and this page reached the end of the log.
type LogsPage struct {
	Lines      []LogLineView `json:"lines"`
	NextCursor int           `json:"nextCursor"`
	Complete   bool          `json:"complete"`
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func i64Ptr(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}

// NewRunView converts a store run.
func NewRunView(r *store.Run) RunView {
	return RunView{
		RunID: r.ID, WorkflowName: r.WorkflowName, Status: r.Status, Provider: r.Provider,
		RepoIdentifier: r.RepoIdentifier, RepoURL: r.RepoURL, Ref: r.Ref, SHA: r.SHA,
		DeliveryID: strPtr(r.DeliveryID), SourceID: strPtr(r.SourceID), OrgID: r.OrgID,
		TriggeredBy: strPtr(r.TriggeredBy), FailureReason: strPtr(r.FailureReason),
		TimeoutMs: i64Ptr(r.TimeoutMs), CreatedAt: r.CreatedAt, StartedAt: r.StartedAt,
		CompletedAt: r.CompletedAt, DurationMs: r.DurationMs,
		TriggerType: strPtr(r.TriggerType), TargetBranch: strPtr(r.TargetBranch),
		TrustTier: strPtr(r.TrustTier), LockFileSource: strPtr(r.LockFileSource),
	}
}

// NewJobView converts a store job (without steps).
func NewJobView(j *store.Job) JobView {
	labels := j.RunsOnLabels
	if labels == nil {
		labels = []string{}
	}
	needs := j.Needs
	if needs == nil {
		needs = []store.Need{}
	}
	return JobView{
		JobID: j.ID, RunID: j.RunID, JobName: j.JobName, BaseJobName: j.BaseJobName, Status: j.Status,
		MatrixValues: j.MatrixValues, AgentID: strPtr(j.AgentID), StartedAt: j.StartedAt,
		CompletedAt: j.CompletedAt, DurationMs: j.DurationMs, ErrorMessage: strPtr(j.ErrorMessage),
		RoutingReason: strPtr(j.PendingReason), RunsOnLabels: labels, CreatedAt: j.CreatedAt,
		Needs: needs, TimeoutMs: i64Ptr(j.TimeoutMs), LastHeartbeatAt: j.LastHeartbeatAt,
	}
}

// NewStepView converts a store step.
func NewStepView(s *store.Step) StepView {
	return StepView{
		StepIndex: s.StepIndex, StepName: s.StepName, Status: s.Status, ExitCode: s.ExitCode,
		ErrorMessage: strPtr(s.ErrorMessage), LogBytes: s.LogBytes, StartedAt: s.StartedAt,
		CompletedAt: s.CompletedAt, DurationMs: s.DurationMs,
	}
}

// parseIntParam parses query parameter name as an integer ≥ min; def when
// absent.
func parseIntParam(r *http.Request, name string, def, min int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min {
		return 0, fmt.Errorf("Invalid %s %q: must be an integer ≥ %d", name, v, min)
	}
	return n, nil
}

func (s *server) listRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var f store.RunFilter
	var statusCSV *string
	if raw := q.Get("status"); raw != "" {
		seen := map[string]bool{}
		for _, v := range strings.Split(raw, ",") {
			v = strings.TrimSpace(v)
			if v == "" || seen[v] {
				continue
			}
			if !contains(StatusFilterValues, v) {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid status %q (allowed: %s)", v, strings.Join(StatusFilterValues, ", ")))
				return
			}
			seen[v] = true
			f.Statuses = append(f.Statuses, status.Run(v))
		}
		if len(f.Statuses) > 0 {
			j := strings.Join(status.Strings(f.Statuses), ",")
			statusCSV = &j
		}
	}
	f.WorkflowName = q.Get("workflowName")
	f.Repo = q.Get("repo")
	f.DeliveryID = q.Get("deliveryId")
	f.RoutingKey = callerRoutingKey(r)
	var sinceOut *string
	if raw := q.Get("since"); raw != "" {
		t, err := time.Parse(time.RFC3339Nano, raw)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid since %q: must be an ISO 8601 timestamp with a time zone, e.g. 2026-01-02T15:04:05Z", raw))
			return
		}
		t = t.UTC()
		f.Since = &t
		out := t.Format(time.RFC3339Nano)
		sinceOut = &out
	}
	countMode := q.Get("count") == "true" || q.Get("count") == "1"
	limit, err := parseIntParam(r, "limit", DefaultRunLimit, 1)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	f.Limit = min(limit, MaxRunLimit)
	if f.Offset, err = parseIntParam(r, "offset", 0, 0); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if countMode {
		f.Limit, f.Offset = 1, 0
	}
	runs, total, err := s.d.Store.ListRuns(r.Context(), f)
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	if countMode {
		writeJSON(w, http.StatusOK, map[string]any{
			"total": total, "since": sinceOut, "status": statusCSV,
			"workflowName": strPtr(f.WorkflowName), "repo": strPtr(f.Repo),
		})
		return
	}
	views := make([]RunView, 0, len(runs))
	for _, run := range runs {
		views = append(views, NewRunView(run))
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": views, "total": total, "limit": f.Limit, "offset": f.Offset})
}

// loadRun fetches the {runId} run or writes 404/500 and returns nil.
func (s *server) loadRun(w http.ResponseWriter, r *http.Request) *store.Run {
	run, err := s.d.Store.GetRun(r.Context(), r.PathValue("runId"))
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "Run not found")
		return nil
	} else if err != nil {
		s.internalError(w, r, err)
		return nil
	}
	return run
}

func (s *server) getRun(w http.ResponseWriter, r *http.Request) {
	if run := s.loadRun(w, r); run != nil {
		v := NewRunView(run)
		v.ParentRunID = s.parentOf(r.Context(), run.ID)
		writeJSON(w, http.StatusOK, map[string]any{"run": v})
	}
}

func (s *server) listJobs(w http.ResponseWriter, r *http.Request) {
	run := s.loadRun(w, r)
	if run == nil {
		return
	}
	includeSteps := r.URL.Query().Get("includeSteps") == "true" || r.URL.Query().Get("includeSteps") == "1"
	jobs, err := s.d.Store.ListJobs(r.Context(), run.ID)
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	outputs, err := s.d.Store.ListJobOutputs(r.Context(), run.ID)
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	views := make([]JobView, 0, len(jobs))
	for _, j := range jobs {
		v := NewJobView(j)
		v.Outputs = outputs[j.ID]
		if includeSteps {
			steps, err := s.d.Store.ListSteps(r.Context(), j.ID)
			if err != nil {
				s.internalError(w, r, err)
				return
			}
			v.Steps = make([]StepView, 0, len(steps))
			for _, st := range steps {
				v.Steps = append(v.Steps, NewStepView(st))
			}
		}
		views = append(views, v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"jobs": views})
}

func (s *server) stepLogs(w http.ResponseWriter, r *http.Request) {
	idx, err := strconv.Atoi(r.PathValue("i"))
	if err != nil || idx < -1 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid step index %q: must be an integer ≥ -1 (-1 = job setup)", r.PathValue("i")))
		return
	}
	cursor, err := parseIntParam(r, "cursor", 0, 0)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	limit, err := parseIntParam(r, "limit", DefaultLogLimit, 1)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	limit = min(limit, MaxLogLimit)
	run := s.loadRun(w, r)
	if run == nil {
		return
	}
	job, err := s.d.Store.GetJob(r.Context(), r.PathValue("jobId"))
	if errors.Is(err, store.ErrNotFound) || (err == nil && job.RunID != run.ID) {
		writeError(w, http.StatusNotFound, "Job not found")
		return
	} else if err != nil {
		s.internalError(w, r, err)
		return
	}
	if n, ok := stepCount(job.Config); ok && idx >= n {
		writeError(w, http.StatusNotFound, fmt.Sprintf("Step %d not found: job %q has %d steps (0..%d, -1 = job setup)", idx, job.JobName, n, n-1))
		return
	}
	if s.d.Logs == nil {
		writeError(w, http.StatusServiceUnavailable, "Log storage not available")
		return
	}
	// Terminal state is read before the lines, so "complete" never hides
	// lines appended between the two reads.
	terminal, err := runstream.StepFinished(r.Context(), s.d.Store, job, idx)
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	lines, next, err := s.d.Logs.Read(run.ID, job.ID, idx, cursor, limit)
	if errors.Is(err, os.ErrNotExist) {
		lines, next, err = nil, cursor, nil
	}
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	page := LogsPage{Lines: make([]LogLineView, 0, len(lines)), NextCursor: next}
	for _, l := range lines {
		page.Lines = append(page.Lines, LogLineView{TS: l.Timestamp, Stream: l.Stream, Msg: l.Text})
	}
	page.Complete = terminal && len(lines) < limit
	writeJSON(w, http.StatusOK, page)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// stepCount returns the number of steps in a job's lock config, when the
// config can be read.
func stepCount(config json.RawMessage) (int, bool) {
	var cfg struct {
		Steps []json.RawMessage `json:"steps"`
	}
	if len(config) == 0 || json.Unmarshal(config, &cfg) != nil || cfg.Steps == nil {
		return 0, false
	}
	return len(cfg.Steps), true
}
