package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trigger"
)

// orgWorkflow is an organization-wide workflow registered by another
// source of the org, with where it was defined.
type orgWorkflow struct {
	wf     lockfile.Workflow
	origin string
}

// orgWideEnabled reads the cluster switch (KiCI global_workflows_enabled);
// without a settings reader organization-wide workflows are off.
func (p *Processor) orgWideEnabled(ctx context.Context) bool {
	return p.settings != nil && p.settings.Int(ctx, cluster.GlobalWorkflowsEnabled) == 1
}

// orgWideDenied reports whether the operator denied organization-wide
// workflows for src (SourceSettings.OrgWideWorkflows); unreadable
// settings deny, so a database hiccup never runs what may be refused.
func (p *Processor) orgWideDenied(ctx context.Context, src *store.Source) bool {
	set, err := p.st.GetSourceSettings(ctx, src.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false
	case err != nil:
		p.log.Warn("ingest: source settings unreadable; organization-wide workflows not run", "source", src.ID, "err", err)
		return true
	}
	return set.OrgWideWorkflows == store.OrgWideDeny
}

// orgWorkflows returns the organization-wide workflows other sources of
// src's org registered: each from its own source's registered lock, that is
// the lock of that repository's default branch at its last registered
// commit, never the triggering repository's lock and never a branch under
// review (the trust rule: only what was merged where it is defined).
func (p *Processor) orgWorkflows(ctx context.Context, src *store.Source) ([]orgWorkflow, error) {
	regs, err := p.st.ListRegistrations(ctx, store.RegistrationFilter{OrgID: src.OrgID})
	if err != nil {
		return nil, fmt.Errorf("organization-wide workflows of org %s: %w", src.OrgID, err)
	}
	var out []orgWorkflow
	for _, r := range regs {
		if r.SourceID == src.ID {
			continue
		}
		var wf lockfile.Workflow
		if err := json.Unmarshal(r.Workflow, &wf); err != nil {
			p.log.Warn("ingest: registered workflow unreadable", "registration", r.ID, "err", err)
			continue
		}
		if !lockfile.IsOrgWide(&wf) {
			continue
		}
		sha := r.SHA
		if len(sha) > 12 {
			sha = sha[:12]
		}
		out = append(out, orgWorkflow{wf: wf, origin: r.RepoIdentifier + "@" + sha + ":" + wf.Source.File})
	}
	return out, nil
}

// matchOrgWide matches the organization-wide workflows of the other sources
// of src's org against ev and stages their runs in b, each built from its
// own lock entry but checking out the triggering commit (base). The
// decisions and runs join tr; a decision is named "<workflow> (from
// <origin>)". Nothing happens unless the cluster setting is on, nor for a
// source the operator denied them (orgWideDenied; the trace says so).
func (p *Processor) matchOrgWide(ctx context.Context, d *store.Delivery, tr *Trace, src *store.Source, ev *trigger.Event, base RunContext, b *stagedRuns) error {
	if !p.orgWideEnabled(ctx) {
		return nil
	}
	ows, err := p.orgWorkflows(ctx, src)
	if err != nil || len(ows) == 0 {
		return err
	}
	if p.orgWideDenied(ctx, src) {
		tr.Workflows = append(tr.Workflows, trigger.Decision{Name: "organization-wide workflows", Checks: []trigger.Check{{
			Check: "org-wide workflows", Pattern: store.OrgWideDeny, Value: src.ID, Passed: false,
			Reason: fmt.Sprintf("the operator denies the org's %d organization-wide workflow(s) for this source (kici-admin source org-wide-workflows %s allow)", len(ows), src.ID)}},
			Summary: "Denied for this source"})
		return nil
	}
	wfs := make([]lockfile.Workflow, len(ows))
	origins := map[*lockfile.Workflow]string{}
	for i := range ows {
		wfs[i] = ows[i].wf
		origins[&wfs[i]] = ows[i].origin
	}
	sub := &Trace{}
	err = p.matchAndCreate(ctx, d, sub, wfs, ev, func(wf *lockfile.Workflow) RunContext {
		rc := base
		rc.WorkflowOrigin = origins[wf]
		return rc
	}, b)
	for i := range sub.Workflows {
		sub.Workflows[i].Name += " (from " + ows[i].origin + ")"
	}
	tr.Workflows = append(tr.Workflows, sub.Workflows...)
	tr.Runs = append(tr.Runs, sub.Runs...)
	tr.Errors = append(tr.Errors, sub.Errors...)
	tr.Warnings = append(tr.Warnings, sub.Warnings...)
	return err
}
