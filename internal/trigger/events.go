package trigger

import (
	"encoding/json"
	"fmt"
	"time"

	"kici.dev/kici/internal/provider"
)

// GenericTargetBranch is the TargetBranch of generic-source events (KiCI
// providers/generic/normalizer.ts).
const GenericTargetBranch = "__generic__"

// DefaultGenericEventName is the inbound event name of a generic delivery
// that names none; it yields no Action.
const DefaultGenericEventName = "default"

// decodeBody decodes a webhook body that must be a JSON object.
func decodeBody(body []byte) (map[string]any, error) {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("body is not JSON: %v", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("body is not a JSON object")
	}
	return m, nil
}

// GenericEvent normalizes a generic-source delivery (KiCI generic
// normalizer): type "generic_webhook", TargetBranch "__generic__", Action =
// eventName unless it is "" or "default", Provider "generic", and Payload =
// the body with payload.source set to sourceName (the operator's source
// name, which generic_webhook triggers compare; a body's own "source" field
// is overwritten so a sender cannot impersonate another source). The error
// reports a body that is not a JSON object.
func GenericEvent(sourceName, eventName string, body []byte) (*Event, error) {
	p, err := decodeBody(body)
	if err != nil {
		return nil, err
	}
	p["source"] = sourceName
	ev := &Event{Type: KindGenericWebhook, Payload: p, TargetBranch: GenericTargetBranch, Provider: provider.Generic}
	if eventName != DefaultGenericEventName {
		ev.Action = eventName
	}
	return ev, nil
}

// CrossSourceEvent is the synthetic event a generic delivery becomes when it
// fans out to `webhook` triggers registered in the same org (KiCI
// buildCrossSourceEvent): its Type is the inbound event name itself, Action
// the body's "action" string, TargetBranch "__generic__".
func CrossSourceEvent(eventName string, body []byte, sourceRepo string) (*Event, error) {
	p, err := decodeBody(body)
	if err != nil {
		return nil, err
	}
	action, _ := p["action"].(string)
	return &Event{Type: Kind(eventName), Action: action, Payload: p, TargetBranch: GenericTargetBranch, Provider: provider.Generic, SourceRepo: sourceRepo}, nil
}

// KiciEvent is the event an emitted user event becomes (KiCI
// events/event-router.ts): type "kici_event", payload {eventName, payload,
// sourceRepo, sourceRoutingKey}.
func KiciEvent(name string, payload any, sourceRepo, sourceRoutingKey string) *Event {
	return &Event{
		Type: KindKiciEvent,
		Payload: map[string]any{
			"eventName":        name,
			"payload":          payload,
			"sourceRepo":       sourceRepo,
			"sourceRoutingKey": sourceRoutingKey,
		},
		Provider:   provider.Kici,
		SourceRepo: sourceRepo,
	}
}

func withExtra(base map[string]any, extra map[string]any) map[string]any {
	for k, v := range extra {
		if _, set := base[k]; !set {
			base[k] = v
		}
	}
	return base
}

// WorkflowCompleteEvent is the event emitted when a run finishes (KiCI
// __workflow_complete): type "workflow_complete", payload {workflowName,
// status (success|failed|cancelled), sourceRepo} plus extra keys (runId, …)
// that do not override those.
func WorkflowCompleteEvent(workflowName, status, sourceRepo string, extra map[string]any) *Event {
	return &Event{
		Type:       KindWorkflowComplete,
		Payload:    withExtra(map[string]any{"workflowName": workflowName, "status": status, "sourceRepo": sourceRepo}, extra),
		Provider:   provider.Kici,
		SourceRepo: sourceRepo,
	}
}

// JobCompleteEvent is the event emitted when a job finishes (KiCI
// __job_complete): type "job_complete", payload {workflowName, jobName,
// status (success|failed|cancelled|skipped), sourceRepo} plus extra keys.
func JobCompleteEvent(workflowName, jobName, status, sourceRepo string, extra map[string]any) *Event {
	return &Event{
		Type:       KindJobComplete,
		Payload:    withExtra(map[string]any{"workflowName": workflowName, "jobName": jobName, "status": status, "sourceRepo": sourceRepo}, extra),
		Provider:   provider.Kici,
		SourceRepo: sourceRepo,
	}
}

// ScheduleEvent is the event a schedule fire becomes (KiCI
// __schedule_fire): type "schedule", payload {cronExpression,
// registrationId, scheduledAt (RFC 3339, UTC)}.
func ScheduleEvent(cronExpression, registrationID string, scheduledAt time.Time) *Event {
	return &Event{
		Type: KindSchedule,
		Payload: map[string]any{
			"cronExpression": cronExpression,
			"registrationId": registrationID,
			"scheduledAt":    scheduledAt.UTC().Format(time.RFC3339),
		},
		Provider: provider.Kici,
	}
}

// LifecycleEvent is a lifecycle event (workflow_complete, job_complete,
// job_failed, registration_updated): type "lifecycle", payload
// {lifecycleEvent, sourceRepo} plus extra keys.
func LifecycleEvent(lifecycleEvent, sourceRepo string, extra map[string]any) *Event {
	return &Event{
		Type:       KindLifecycle,
		Payload:    withExtra(map[string]any{"lifecycleEvent": lifecycleEvent, "sourceRepo": sourceRepo}, extra),
		Provider:   provider.Kici,
		SourceRepo: sourceRepo,
	}
}
