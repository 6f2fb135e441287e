package ingest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"kici.dev/kici/internal/store"
)

// Registered triggers of a disabled source start nothing: a kici_event and
// a schedule fire that match its registrations create no run while it is
// paused, and do again once it is enabled. A deleted source's
// registrations are gone, so nothing matches at all.
func TestDisabledSourceRegistrationsDoNotFire(t *testing.T) {
	h := newGHHarness(t)
	regs := []*store.Registration{
		{ID: "reg-deploy", OrgID: "acme", WorkflowName: "deploy", TriggerTypes: []string{"kici_event"}, SHA: shaMain,
			Workflow: json.RawMessage(wfJSON("deploy", `[{"_type":"kici_event","eventName":"deploy"}]`))},
		{ID: "reg-nightly", OrgID: "acme", WorkflowName: "nightly", TriggerTypes: []string{"schedule"}, SHA: shaMain,
			Workflow: json.RawMessage(wfJSON("nightly", `[{"_type":"schedule","cronExpression":"0 3 * * *"}]`))},
	}
	if err := h.st.ReplaceRegistrations(h.ctx, h.src.ID, ghRepo, regs); err != nil {
		t.Fatal(err)
	}
	n := 0
	fire := func() (event, schedule map[string]*store.Run) {
		t.Helper()
		n++
		eid, sid := fmt.Sprintf("kici_event:x%d", n), fmt.Sprintf("schedule:k:%d", n)
		if _, err := h.proc.Emit(h.ctx, eid, "acme", &InternalEvent{Kind: KindKiciEvent, EventName: "deploy", Payload: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.proc.Emit(h.ctx, sid, "acme", &InternalEvent{Kind: KindSchedule, CronExpression: "0 3 * * *", RegistrationID: "reg-nightly",
			ScheduledAt: time.Date(2026, 1, 5, 3, 0, 0, 0, time.UTC).Format(time.RFC3339), TargetSourceID: h.src.ID, TargetRepo: ghRepo,
			TargetWorkflow: "nightly"}); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{eid, sid} {
			if err := h.proc.Process(h.ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		return h.runs(eid), h.runs(sid)
	}

	if err := h.st.SetSourceEnabled(h.ctx, h.src.ID, false); err != nil {
		t.Fatal(err)
	}
	if ev, sc := fire(); len(ev) != 0 || len(sc) != 0 {
		t.Fatalf("disabled source: kici_event runs %v, schedule runs %v; want none", ev, sc)
	}
	if err := h.st.SetSourceEnabled(h.ctx, h.src.ID, true); err != nil {
		t.Fatal(err)
	}
	if ev, sc := fire(); ev["deploy"] == nil || sc["nightly"] == nil {
		t.Fatalf("re-enabled source: kici_event runs %v, schedule runs %v; want deploy and nightly", ev, sc)
	}
	if err := h.st.DeleteSource(h.ctx, h.src.ID, nil); err != nil {
		t.Fatal(err)
	}
	if ev, sc := fire(); len(ev) != 0 || len(sc) != 0 {
		t.Fatalf("deleted source: kici_event runs %v, schedule runs %v; want none", ev, sc)
	}
}
