package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/ghapi"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trigger"
)

// Replier answers a comment on the forge (forgestatus.Reporter.Reply): ev
// is the normalized comment event, text the answer. It must not block:
// the forge may be down.
type Replier func(ctx context.Context, src *store.Source, ev *trigger.Event, text string)

func (p *Processor) reply(ctx context.Context, src *store.Source, ev *trigger.Event, text string) {
	if p.replier != nil {
		p.replier(ctx, src, ev, text)
	}
}

// RerunRefuser shows a refused re-run request on the forge
// (forgestatus.Reporter.RerunRefused): repo and sha name the commit the
// request was made on, installation the GitHub App installation (0 =
// look it up), why the refusal. It must not block.
type RerunRefuser func(ctx context.Context, src *store.Source, repo, sha string, installation int64, why string)

// decisionReply is the answer to an accepted `/kici approve|reject`.
func decisionReply(verb, runID, who string, status hold.Status) string {
	switch status {
	case hold.Approved, hold.Released: // the decider answers released when the last clause is satisfied
		return fmt.Sprintf("kici: run %s approved by @%s; it runs now.", runID, who)
	case hold.Rejected:
		return fmt.Sprintf("kici: run %s rejected by @%s; its held jobs are cancelled.", runID, who)
	}
	return fmt.Sprintf("kici: `/kici %s %s` by @%s recorded; the hold is %s (it waits for further approvals).", verb, runID, who, status)
}

// handleRerequest acts on GitHub's "Re-run" buttons (KiCI github checks):
// check_run rerequested reruns that check's job and the jobs that depend
// on it (RerunJobs; the run's other jobs keep their results), check_suite
// rerequested every run reported on the suite's commit (Rerun). The requester must have write access to the
// repository (the permission check of approvals); a refusal is the
// delivery's trace summary, so it is recorded in the event log, and is
// shown on the commit (RerunRefuser). handled is false for any other event.
func (p *Processor) handleRerequest(ctx context.Context, d *store.Delivery, src *store.Source, payload map[string]any) (*Trace, bool) {
	if (d.Event != "check_run" && d.Event != "check_suite") || jsonStr(payload, "action") != "rerequested" {
		return nil, false
	}
	tr := &Trace{Event: d.Event}
	repo, sender := jsonStr(payload, "repository", "full_name"), jsonStr(payload, "sender", "login")
	refuse := func(why string) (*Trace, bool) {
		tr.Summary = fmt.Sprintf("%s re-run requested by %q refused: %s", d.Event, sender, why)
		p.log.Warn("ingest: "+tr.Summary, "sourceId", src.ID)
		if p.rerunRefused != nil {
			sha := jsonStr(payload, "check_run", "head_sha")
			if d.Event == "check_suite" {
				sha = jsonStr(payload, "check_suite", "head_sha")
			}
			p.rerunRefused(ctx, src, repo, sha, jsonInt(payload, "installation", "id"),
				fmt.Sprintf("The re-run requested by @%s was refused: %s.", sender, why))
		}
		return tr, true
	}
	set, err := p.st.GetSourceSettings(ctx, src.ID)
	if err != nil {
		return refuse("source settings unreadable: " + err.Error())
	}
	client, err := p.forges().GitHubClient(set)
	if err != nil {
		return refuse(err.Error())
	}
	perm, err := client.Permission(ctx, jsonInt(payload, "installation", "id"), repo, sender)
	if err != nil {
		return refuse("permission lookup failed: " + err.Error())
	}
	if !ghapi.CanWrite(perm) {
		return refuse(fmt.Sprintf("%q has %q permission on %s (write required)", sender, perm, repo))
	}
	var runIDs []string
	only := map[string]string{} // run id → the one job a check_run re-run reruns
	if d.Event == "check_run" {
		jobID := jsonStr(payload, "check_run", "external_id")
		job, err := p.st.GetJob(ctx, jobID)
		if err != nil {
			return refuse(fmt.Sprintf("check run %s names no kici job (external_id %q)", strconv.FormatInt(jsonInt(payload, "check_run", "id"), 10), jobID))
		}
		runIDs = []string{job.RunID}
		only[job.RunID] = job.JobName
	} else {
		rows, err := p.st.ListCheckRuns(ctx, store.CheckRunFilter{SHA: jsonStr(payload, "check_suite", "head_sha")})
		if err != nil {
			return refuse(err.Error())
		}
		seen := map[string]bool{}
		for _, c := range rows {
			if c.SourceID == src.ID && c.Repo == repo && !seen[c.RunID] {
				seen[c.RunID] = true
				runIDs = append(runIDs, c.RunID)
			}
		}
		if len(runIDs) == 0 {
			return refuse("kici reported no run on that commit")
		}
	}
	var errs []error
	for _, id := range runIDs {
		run, err := p.st.GetRun(ctx, id)
		if err != nil || run.SourceID != src.ID || run.RepoIdentifier != repo {
			errs = append(errs, fmt.Errorf("run %s is not a run of %s", id, repo))
			continue
		}
		if l, err := p.st.GetRunLink(ctx, id); err == nil && l.ParentRunID != "" && seenRerun(runIDs, l.ParentRunID) {
			continue // already the rerun of a listed run
		}
		var nr *store.Run
		if name, ok := only[id]; ok {
			nr, err = p.RerunJobs(ctx, id, "github:"+sender, []string{name})
		} else {
			nr, err = p.Rerun(ctx, id, "github:"+sender)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("run %s: %w", id, err))
			continue
		}
		tr.Runs = append(tr.Runs, RunRef{WorkflowName: nr.WorkflowName, RunID: nr.ID})
	}
	tr.Summary = fmt.Sprintf("%s re-run requested by %s: %d runs created", d.Event, sender, len(tr.Runs))
	if len(errs) > 0 {
		tr.Summary += "; " + errors.Join(errs...).Error()
	}
	return tr, true
}

func seenRerun(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// handleRerequestDelivery decodes d for handleRerequest.
func (p *Processor) handleRerequestDelivery(ctx context.Context, d *store.Delivery, src *store.Source) (*Trace, bool) {
	if d.Event != "check_run" && d.Event != "check_suite" {
		return nil, false
	}
	var payload map[string]any
	if err := json.Unmarshal(d.Payload, &payload); err != nil {
		return nil, false
	}
	return p.handleRerequest(ctx, d, src, payload)
}
