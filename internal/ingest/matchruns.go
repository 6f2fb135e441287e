package ingest

// The one path from a matched workflow to a staged run, which every
// delivery's runs take (local pushes, forge events, internal events and
// organization-wide workflows).

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trigger"
)

// matchAndCreate matches each workflow against ev and stages the runs
// (matchWorkflows), then sums the outcome up in tr's summary. Any error
// recorded on tr, this call's or an earlier step's, fails the delivery.
func (p *Processor) matchAndCreate(ctx context.Context, d *store.Delivery, tr *Trace, wfs []lockfile.Workflow, ev *trigger.Event,
	rcFor func(wf *lockfile.Workflow) RunContext, b *stagedRuns) error {
	matched, err := p.matchWorkflows(ctx, d, tr, wfs, ev, rcFor, b)
	if err != nil {
		return err
	}
	tr.Summary = fmt.Sprintf("%d of %d workflows matched; %d runs created", matched, len(wfs), len(tr.Runs))
	if len(wfs) == 0 {
		tr.Summary = "no workflows to match"
	}
	if len(tr.Errors) > 0 {
		return errors.New(strings.Join(tr.Errors, "; "))
	}
	return nil
}

// matchWorkflows matches each workflow against ev, records the decisions on
// tr and stages in b a run per matched workflow that has none yet for this
// delivery, stored or staged (a re-processing after a crash, or a second
// trigger type of the same delivery, creates nothing twice). Runs are
// keyed by repository, workflow name and origin. Every run of a delivery
// is created here: built from rcFor(wf) and the event, entered in its
// concurrency group, then staged.
//
// A workflow that cannot be run is recorded in tr.Errors and the others
// go on; the error reports only that the delivery's runs could not be
// read, before anything was matched. It returns how many workflows
// matched.
func (p *Processor) matchWorkflows(ctx context.Context, d *store.Delivery, tr *Trace, wfs []lockfile.Workflow, ev *trigger.Event,
	rcFor func(wf *lockfile.Workflow) RunContext, b *stagedRuns) (int, error) {
	// Runs are stored with the delivery's outcome, in the transaction
	// that finishes it (Process), so a delivery whose claim found none
	// stored has none: only a re-processing reads them.
	var runs []*store.Run
	if !p.hasNoRuns(d.ID) {
		var err error
		if runs, _, err = p.st.ListRuns(ctx, store.RunFilter{DeliveryID: d.ID, Limit: 100}); err != nil {
			return 0, fmt.Errorf("runs of delivery %s: %w", d.ID, err)
		}
	}
	existing := map[string]*store.Run{}
	for _, r := range runs {
		existing[r.RepoIdentifier+"\x00"+r.WorkflowName+"\x00"+r.WorkflowOrigin] = r
	}
	for _, nr := range *b {
		existing[nr.Run.RepoIdentifier+"\x00"+nr.Run.WorkflowName+"\x00"+nr.Run.WorkflowOrigin] = nr.Run
	}
	matched := 0
	for i := range wfs {
		wf := &wfs[i]
		dec := trigger.MatchWorkflow(wf, ev)
		tr.Workflows = append(tr.Workflows, dec)
		if !dec.Matched {
			continue
		}
		matched++
		rc := rcFor(wf).withEvent(ev)
		if r, ok := existing[rc.RepoIdentifier+"\x00"+wf.Name+"\x00"+rc.WorkflowOrigin]; ok {
			tr.Runs = append(tr.Runs, RunRef{WorkflowName: wf.Name, RunID: r.ID})
			continue
		}
		rc.LibraryDrift = p.libraryDrift(ctx, tr, wf) // librarydrift.go
		ref, err := p.stageRun(ctx, d, wf, dec, ev, rc, b)
		if err != nil {
			tr.Errors = append(tr.Errors, fmt.Sprintf("workflow %q: %v", wf.Name, err))
			continue
		}
		tr.Runs = append(tr.Runs, ref)
	}
	return matched, nil
}

// stageRun builds the run of a matched workflow, enters it in its
// concurrency group and stages it in b.
func (p *Processor) stageRun(ctx context.Context, d *store.Delivery, wf *lockfile.Workflow, dec trigger.Decision, ev *trigger.Event,
	rc RunContext, b *stagedRuns) (RunRef, error) {
	run, jobs, err := BuildRun(wf, rc)
	if err != nil {
		return RunRef{}, err
	}
	if err := p.enterGroup(ctx, wf, run, d.Event); err != nil {
		return RunRef{}, err
	}
	if err := p.stage(b, run, jobs, eventRunContext(wf, dec, ev)); err != nil {
		return RunRef{}, err
	}
	return RunRef{WorkflowName: wf.Name, RunID: run.ID, Jobs: len(jobs)}, nil
}
