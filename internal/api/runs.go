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

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runstream"
	"kici.dev/kici/internal/store"
)

// StatusFilterValues is the canonical status union accepted by GET /runs
// ?status= (KiCI RUN_STATUSES): run statuses plus job-only statuses, which
// simply match no run row.
var StatusFilterValues = status.FilterWords()

func strPtr[S ~string](s S) *S {
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
func NewRunView(r *store.Run) apitypes.RunView {
	return apitypes.RunView{
		RunID: r.ID, WorkflowName: r.WorkflowName, Status: r.Status, Provider: r.Provider,
		RepoIdentifier: r.RepoIdentifier, RepoURL: r.RepoURL, Ref: r.Ref, SHA: r.SHA,
		DeliveryID: strPtr(r.DeliveryID), SourceID: strPtr(r.SourceID), OrgID: r.OrgID,
		TriggeredBy: strPtr(r.TriggeredBy), FailureReason: strPtr(r.FailureReason),
		TimeoutMs: i64Ptr(r.TimeoutMs), CreatedAt: r.CreatedAt, StartedAt: r.StartedAt,
		CompletedAt: r.CompletedAt, DurationMs: r.DurationMs,
		TriggerType: strPtr(r.TriggerType), TargetBranch: strPtr(r.TargetBranch),
		TrustTier: strPtr(r.TrustTier), LockFileSource: strPtr(r.LockFileSource),
		WorkflowOrigin: r.WorkflowOrigin,
	}
}

// NewJobView converts a store job (without steps).
func NewJobView(j *store.Job) apitypes.JobView {
	labels := j.RunsOnLabels
	if labels == nil {
		labels = []string{}
	}
	return apitypes.JobView{
		JobID: j.ID, RunID: j.RunID, JobName: j.JobName, BaseJobName: j.BaseJobName, Status: j.Status,
		MatrixValues: j.MatrixValues, AgentID: strPtr(j.AgentID), StartedAt: j.StartedAt,
		CompletedAt: j.CompletedAt, DurationMs: j.DurationMs, ErrorMessage: strPtr(j.ErrorMessage),
		RoutingReason: strPtr(j.PendingReason), RunsOnLabels: labels, CreatedAt: j.CreatedAt,
		Needs: orEmpty(j.Needs), TimeoutMs: i64Ptr(j.TimeoutMs), LastHeartbeatAt: j.LastHeartbeatAt,
	}
}

// NewStepView converts a store step.
func NewStepView(s *store.Step) apitypes.StepView {
	return apitypes.StepView{
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
		// The text is the API's answer as is, capitalized like its other answers.
		return 0, fmt.Errorf("Invalid %s %q: must be an integer ≥ %d", name, v, min) //nolint:staticcheck // ST1005: shown to the caller verbatim, never wrapped
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
	// kici: runs whose target branch, or whose refs/heads/ ref, is branch
	// (a KiCI extension, the filter of the web UI's run list).
	f.Branch = strings.TrimPrefix(q.Get("branch"), "refs/heads/")
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
	limit, err := parseIntParam(r, "limit", apitypes.DefaultRunLimit, 1)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	f.Limit = min(limit, apitypes.MaxRunLimit)
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
		writeJSON(w, http.StatusOK, apitypes.RunCount{Total: total, Since: sinceOut, Status: statusCSV,
			WorkflowName: strPtr(f.WorkflowName), Repo: strPtr(f.Repo)})
		return
	}
	views := make([]apitypes.RunView, 0, len(runs))
	for _, run := range runs {
		views = append(views, NewRunView(run))
	}
	writeJSON(w, http.StatusOK, apitypes.RunList{Runs: views, Total: total, Limit: f.Limit, Offset: f.Offset})
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

// loadJobOfRun reads the job {jobId} of the run {runId} in one read when
// both exist and belong together: a page of a log is read often (a
// follower's every poll), and the run itself adds nothing to it but a
// round trip. Otherwise it answers 404 as loadRun would first ("Run not
// found"), then "Job not found", and returns nil.
func (s *server) loadJobOfRun(w http.ResponseWriter, r *http.Request) *store.Job {
	job, err := s.d.Store.GetJob(r.Context(), r.PathValue("jobId"))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.internalError(w, r, err)
		return nil
	}
	if err == nil && job.RunID == r.PathValue("runId") {
		return job
	}
	if s.loadRun(w, r) != nil {
		writeError(w, http.StatusNotFound, "Job not found")
	}
	return nil
}

func (s *server) getRun(w http.ResponseWriter, r *http.Request) {
	if run := s.loadRun(w, r); run != nil {
		v := NewRunView(run)
		v.ParentRunID = s.parentOf(r.Context(), run.ID)
		writeJSON(w, http.StatusOK, apitypes.RunEnvelope{Run: v})
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
	views := make([]apitypes.JobView, 0, len(jobs))
	for _, j := range jobs {
		v := NewJobView(j)
		v.Outputs = outputs[j.ID]
		if includeSteps {
			steps, err := s.d.Store.ListSteps(r.Context(), j.ID)
			if err != nil {
				s.internalError(w, r, err)
				return
			}
			v.Steps = make([]apitypes.StepView, 0, len(steps))
			for _, st := range steps {
				v.Steps = append(v.Steps, NewStepView(st))
			}
		}
		views = append(views, v)
	}
	writeJSON(w, http.StatusOK, apitypes.JobList{Jobs: views})
}

func (s *server) stepLogs(w http.ResponseWriter, r *http.Request) {
	idx, err := strconv.Atoi(r.PathValue("i"))
	if err != nil || idx < protocol.ContainerBuildStepIndex {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid step index %q: must be an integer ≥ -2 (-1 = job setup, -2 = container image build)", r.PathValue("i")))
		return
	}
	cursor, err := parseIntParam(r, "cursor", 0, 0)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	limit, err := parseIntParam(r, "limit", apitypes.DefaultLogLimit, 1)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	limit = min(limit, apitypes.MaxLogLimit)
	job := s.loadJobOfRun(w, r)
	if job == nil {
		return
	}
	if n, ok := stepCount(job.Config); ok && idx >= n {
		writeError(w, http.StatusNotFound, fmt.Sprintf("Step %d not found: job %q has %d steps (0..%d, -1 = job setup, -2 = container image build)", idx, job.JobName, n, n-1))
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
	lines, next, err := s.d.Logs.Read(job.RunID, job.ID, idx, cursor, limit)
	if errors.Is(err, os.ErrNotExist) {
		lines, next, err = nil, cursor, nil
	}
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	page := apitypes.LogsPage{Lines: make([]apitypes.LogLineView, 0, len(lines)), NextCursor: next}
	for _, l := range lines {
		page.Lines = append(page.Lines, apitypes.LogLineView{TS: l.Timestamp, Stream: string(l.Stream), Msg: l.Text})
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
