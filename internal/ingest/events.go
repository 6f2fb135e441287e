package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trigger"
)

// Internal event kinds (the Event of an internal delivery).
const (
	KindKiciEvent        = trigger.KindKiciEvent
	KindWorkflowComplete = trigger.KindWorkflowComplete
	KindJobComplete      = trigger.KindJobComplete
	KindSchedule         = trigger.KindSchedule
)

// MaxChainDepth bounds chains of internal events (a run started by an
// internal event whose completion starts another…): KiCI's event router
// limit of 10 (see docs/kici-compatibility.md#triggers).
const MaxChainDepth = 10

// InternalEvent is the payload of an internal delivery: an event kici
// itself emits (operator-emitted kici_event, workflow_complete, job_complete,
// schedule fire). It is persisted as a delivery with no source, so it is
// never lost and, keyed by a deterministic id, never processed twice; it is
// matched against the registration index.
type InternalEvent struct {
	Kind trigger.Kind `json:"kind"`
	// kici_event
	EventName        string          `json:"eventName,omitempty"`
	Payload          json.RawMessage `json:"payload,omitempty"`
	SourceRepo       string          `json:"sourceRepo,omitempty"`
	SourceRoutingKey string          `json:"sourceRoutingKey,omitempty"`
	// workflow_complete / job_complete
	WorkflowName string `json:"workflowName,omitempty"`
	JobName      string `json:"jobName,omitempty"`
	Status       string `json:"status,omitempty"`
	RunID        string `json:"runId,omitempty"`
	JobID        string `json:"jobId,omitempty"`
	// schedule: the registration fired, identified by source, repository
	// and workflow (registration ids change on every re-registration).
	CronExpression string `json:"cronExpression,omitempty"`
	Timezone       string `json:"timezone,omitempty"`
	RegistrationID string `json:"registrationId,omitempty"`
	ScheduledAt    string `json:"scheduledAt,omitempty"`
	TargetSourceID string `json:"targetSourceId,omitempty"`
	TargetRepo     string `json:"targetRepo,omitempty"`
	TargetWorkflow string `json:"targetWorkflow,omitempty"`
	// ChainDepth is 0 for operator/schedule events, parent depth + 1 for
	// completion events of runs started by internal events.
	ChainDepth int `json:"chainDepth"`
}

// Emit persists an internal event as a delivery with id (the idempotency
// key: a second Emit with the same id changes nothing and reports
// duplicate) in orgID ("" = every org's registrations), with its event-log
// entry, then submits it for processing.
func (p *Processor) Emit(ctx context.Context, id, orgID string, ie *InternalEvent) (duplicate bool, err error) {
	body, err := json.Marshal(ie)
	if err != nil {
		return false, err
	}
	sum := sha256.Sum256(body)
	now := time.Now().UTC()
	d := &store.Delivery{ID: id, OrgID: orgID, Event: string(ie.Kind), Payload: body, ReceivedAt: now}
	e := &store.EventLogEntry{OrgID: orgID, RoutingKey: ie.SourceRoutingKey, Event: string(ie.Kind), Action: ie.EventName, Source: "internal",
		Provider: provider.Kici, RepoIdentifier: ie.SourceRepo, PayloadSizeBytes: int64(len(body)), PayloadHash: hex.EncodeToString(sum[:]),
		PayloadGz: gzipBytes(body)}
	err = p.st.AcceptDelivery(context.WithoutCancel(ctx), d, e)
	if errors.Is(err, store.ErrConflict) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	p.Submit(id)
	return false, nil
}

// chainDepthOf returns the chain depth of the delivery that started runID
// (0 for forge deliveries).
func (p *Processor) chainDepthOf(ctx context.Context, run *store.Run) int {
	if run.DeliveryID == "" {
		return 0
	}
	d, err := p.st.GetDelivery(ctx, run.DeliveryID)
	if err != nil || d.SourceID != "" {
		return 0
	}
	var ie InternalEvent
	if json.Unmarshal(d.Payload, &ie) != nil {
		return 0
	}
	return ie.ChainDepth
}

// listened reports whether a registration of org carries a trigger of
// kind: a completion event no registration listens to could start
// nothing, so it is not stored or processed at all (a run of one job
// would otherwise write two deliveries and two event-log entries that
// match nothing). A failed check answers true: the event is emitted as
// before.
func (p *Processor) listened(ctx context.Context, org string, kind trigger.Kind) bool {
	found, err := p.st.HasRegistrations(ctx, store.RegistrationFilter{OrgID: org, TriggerType: string(kind)})
	if err != nil {
		p.log.Warn("ingest: check for registrations; emitting the event", "kind", kind, "error", err)
		return true
	}
	return found
}

// RunFinished emits the workflow_complete event of a finished run (delivery
// id "workflow_complete:<runId>") when a registration of its org listens
// to workflow_complete; it implements runs.Subscriber.
func (p *Processor) RunFinished(run *store.Run) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !p.listened(ctx, run.OrgID, KindWorkflowComplete) {
		return
	}
	depth := p.chainDepthOf(ctx, run) + 1
	if depth > MaxChainDepth {
		p.log.Warn("ingest: workflow_complete not emitted: event chain too deep", "runId", run.ID, "depth", depth)
		return
	}
	ie := &InternalEvent{Kind: KindWorkflowComplete, WorkflowName: run.WorkflowName, Status: string(run.Status), RunID: run.ID,
		SourceRepo: run.RepoIdentifier, ChainDepth: depth}
	if _, err := p.Emit(ctx, string(KindWorkflowComplete)+":"+run.ID, run.OrgID, ie); err != nil {
		p.log.Error("ingest: emit workflow_complete", "runId", run.ID, "error", err)
	}
}

// JobFinished emits the job_complete event of a finished job (delivery id
// "job_complete:<jobId>") when a registration of its run's org listens to
// job_complete; it implements runs.Subscriber.
func (p *Processor) JobFinished(job *store.Job) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Any org first: where no registration at all listens, the job's run
	// (read for its org) is not read either.
	if !p.listened(ctx, "", KindJobComplete) {
		return
	}
	run, err := p.st.GetRun(ctx, job.RunID)
	if err != nil {
		p.log.Error("ingest: emit job_complete: run lookup", "jobId", job.ID, "error", err)
		return
	}
	if run.OrgID != "" && !p.listened(ctx, run.OrgID, KindJobComplete) {
		return
	}
	depth := p.chainDepthOf(ctx, run) + 1
	if depth > MaxChainDepth {
		p.log.Warn("ingest: job_complete not emitted: event chain too deep", "jobId", job.ID, "depth", depth)
		return
	}
	ie := &InternalEvent{Kind: KindJobComplete, WorkflowName: run.WorkflowName, JobName: job.JobName, Status: string(job.Status),
		RunID: run.ID, JobID: job.ID, SourceRepo: run.RepoIdentifier, ChainDepth: depth}
	if _, err := p.Emit(ctx, string(KindJobComplete)+":"+job.ID, run.OrgID, ie); err != nil {
		p.log.Error("ingest: emit job_complete", "jobId", job.ID, "error", err)
	}
}

// internalEvent converts an internal delivery into the normalized event the
// matcher reads.
func internalEvent(ie *InternalEvent) (*trigger.Event, error) {
	switch ie.Kind {
	case KindKiciEvent:
		var payload any
		if len(ie.Payload) > 0 {
			if err := json.Unmarshal(ie.Payload, &payload); err != nil {
				return nil, fmt.Errorf("kici_event payload: %w", err)
			}
		}
		return trigger.KiciEvent(ie.EventName, payload, ie.SourceRepo, ie.SourceRoutingKey), nil
	case KindWorkflowComplete:
		return trigger.WorkflowCompleteEvent(ie.WorkflowName, ie.Status, ie.SourceRepo, map[string]any{"runId": ie.RunID}), nil
	case KindJobComplete:
		return trigger.JobCompleteEvent(ie.WorkflowName, ie.JobName, ie.Status, ie.SourceRepo, map[string]any{"runId": ie.RunID, "jobId": ie.JobID}), nil
	case KindSchedule:
		at, err := time.Parse(time.RFC3339, ie.ScheduledAt)
		if err != nil {
			return nil, fmt.Errorf("schedule scheduledAt: %w", err)
		}
		return trigger.ScheduleEvent(ie.CronExpression, ie.RegistrationID, at), nil
	}
	return nil, fmt.Errorf("unknown internal event kind %q", ie.Kind)
}

// handleInternal matches an internal delivery against the registration
// index (every registration of the delivery's org carrying a trigger of
// the event's kind; a schedule fire only its target workflow) and creates
// a run per matched registration, at the registered commit.
func (p *Processor) handleInternal(ctx context.Context, d *store.Delivery, b *stagedRuns) (*Trace, error) {
	tr := &Trace{Event: d.Event}
	var ie InternalEvent
	if err := json.Unmarshal(d.Payload, &ie); err != nil {
		return tr, fmt.Errorf("internal event payload: %w", err)
	}
	ev, err := internalEvent(&ie)
	if err != nil {
		return tr, err
	}
	keep := func(g *store.Registration) bool {
		return ie.Kind != KindSchedule || (g.SourceID == ie.TargetSourceID && g.RepoIdentifier == ie.TargetRepo && g.WorkflowName == ie.TargetWorkflow)
	}
	n, err := p.matchRegistrations(ctx, d, tr, d.OrgID, string(ie.Kind), keep, ev, "kici:"+string(ie.Kind), b)
	tr.Summary = fmt.Sprintf("%s event matched against %d registrations; %s", ie.Kind, n, tr.Summary)
	return tr, err
}

// matchRegistrations matches ev against the registrations of org ("" =
// every org) carrying a trigger of triggerType (and accepted by keep), and
// creates a run per matched registration at its registered commit. It
// returns how many registrations were matched against.
func (p *Processor) matchRegistrations(ctx context.Context, d *store.Delivery, tr *Trace, org, triggerType string,
	keep func(*store.Registration) bool, ev *trigger.Event, triggeredBy string, b *stagedRuns) (int, error) {
	regs, err := p.st.ListRegistrations(ctx, store.RegistrationFilter{OrgID: org, TriggerType: triggerType})
	if err != nil {
		return 0, fmt.Errorf("registrations: %w", err)
	}
	var wfs []lockfile.Workflow
	var rcs []RunContext
	var regErrs []string
	sources := map[string]*store.Source{}
	for _, g := range regs {
		if !keep(g) {
			continue
		}
		src, ok := sources[g.SourceID]
		if !ok {
			src, err = p.st.GetSource(ctx, g.SourceID)
			if errors.Is(err, store.ErrNotFound) {
				src = nil
			} else if err != nil {
				return 0, fmt.Errorf("source %s: %w", g.SourceID, err)
			}
			sources[g.SourceID] = src
		}
		if src == nil || !src.Enabled {
			continue
		}
		var wf lockfile.Workflow
		if err := json.Unmarshal(g.Workflow, &wf); err != nil {
			regErrs = append(regErrs, fmt.Sprintf("registration %s (%s %s): %v", g.ID, g.RepoIdentifier, g.WorkflowName, err))
			continue
		}
		wfs = append(wfs, wf)
		rcs = append(rcs, RunContext{DeliveryID: d.ID, Source: src, RepoIdentifier: g.RepoIdentifier, RepoURL: g.RepoURL,
			Ref: g.Ref, SHA: g.SHA, TriggeredBy: triggeredBy})
	}
	index := map[*lockfile.Workflow]RunContext{}
	for i := range wfs {
		index[&wfs[i]] = rcs[i]
	}
	err = p.matchAndCreate(ctx, d, tr, wfs, ev, func(wf *lockfile.Workflow) RunContext { return index[wf] }, b)
	tr.Errors = append(tr.Errors, regErrs...)
	if err == nil && len(regErrs) > 0 {
		err = errors.New(regErrs[0])
	}
	return len(wfs), err
}

// handleGeneric matches a plain generic-source delivery against the
// registration index: generic_webhook triggers (type generic_webhook,
// payload.source = the source's name) and, by raw event name, the org's
// webhook triggers (KiCI's cross-source fan-out; see
// docs/kici-compatibility.md#matching).
func (p *Processor) handleGeneric(ctx context.Context, d *store.Delivery, src *store.Source, b *stagedRuns) (*Trace, error) {
	tr := &Trace{Event: d.Event}
	ev, err := trigger.GenericEvent(src.Name, d.Event, d.Payload)
	if err != nil {
		tr.Summary = "the body is not a JSON object: no generic_webhook or webhook trigger can match"
		return tr, nil
	}
	all := func(*store.Registration) bool { return true }
	n, err := p.matchRegistrations(ctx, d, tr, src.OrgID, "generic_webhook", all, ev, src.Name, b)
	if err != nil {
		return tr, err
	}
	summary := fmt.Sprintf("generic_webhook: %d registrations, %s", n, tr.Summary)
	if d.Event != "" && d.Event != "default" {
		cev, err := trigger.CrossSourceEvent(d.Event, d.Payload, "")
		if err == nil {
			m, err := p.matchRegistrations(ctx, d, tr, src.OrgID, "webhook", all, cev, src.Name, b)
			summary += fmt.Sprintf("; webhook %q: %d registrations, %s", d.Event, m, tr.Summary)
			if err != nil {
				tr.Summary = summary
				return tr, err
			}
		}
	}
	tr.Summary = summary
	return tr, nil
}
