package runctl

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
)

// Workflow concurrency groups (see docs/kici-compatibility.md#runs-and-statuses).
// A run of a workflow with `concurrency` joins the group
// named by rendering the group template over the event (scope: the
// repository). Defaults, as in KiCI, are max 1 and cancelInProgress true.
//
//   - cancelInProgress: the newest run takes the group; every older run of
//     the group still active or waiting is cancelled ("superseded by run X
//     in concurrency group 'g'"); a run that arrives older than one already
//     in the group is itself superseded.
//   - otherwise: a run starts when fewer than max runs of the group are
//     active and it is the oldest waiting one; else its jobs stay pending
//     (the run stays pending) until a slot frees.
//
// A slot is released on every terminal path of the run (success, failure,
// cancel, timeout); the next waiting run is then admitted and its jobs
// released. Entries live in the database, and the sweeper reconciles them,
// so an orchestrator restart keeps the groups.

// GroupFields are the event fields a group template may use as ${name}.
var GroupFields = []string{"ref", "branch", "sha", "repo", "workflow", "event"}

var placeholder = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// RenderGroup replaces ${field} in tmpl by the event's value (GroupFields);
// an unknown field is an error.
func RenderGroup(tmpl string, fields map[string]string) (string, error) {
	var bad []string
	out := placeholder.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := placeholder.FindStringSubmatch(m)[1]
		v, ok := fields[name]
		if !ok {
			bad = append(bad, name)
		}
		return v
	})
	if len(bad) > 0 {
		return "", fmt.Errorf("concurrency group %q: unknown field(s) %s (known: %s)", tmpl, strings.Join(bad, ", "), strings.Join(GroupFields, ", "))
	}
	return out, nil
}

// RunFields returns the template fields of a run triggered by event.
func RunFields(run *store.Run, event string) map[string]string {
	return map[string]string{
		"ref": run.Ref, "branch": strings.TrimPrefix(strings.TrimPrefix(run.Ref, "refs/heads/"), "refs/tags/"),
		"sha": run.SHA, "repo": run.RepoIdentifier, "workflow": run.WorkflowName, "event": event,
	}
}

// maxUngrouped bounds the runs remembered as having no group. A run is
// forgotten when it finishes here, but one created here and finished by
// another node, or staged and then not created, is not: past the bound
// the set is emptied, which costs those runs still here one read each.
const maxUngrouped = 1 << 14

// EnterGroup records that run (not created yet) belongs to the workflow's
// concurrency group; call it before the tracker creates the run. Without a
// group it writes nothing and remembers that the run has none, so Admit
// and RunFinished need not look for its entry: only EnterGroup writes an
// entry, with the run's id, before the run exists, so a run entered
// without a group never gets one, on any node. Errors: an unknown template
// field, store errors.
func (c *Controller) EnterGroup(ctx context.Context, run *store.Run, cfg *lockfile.Concurrency, event string) error {
	if cfg == nil || !cfg.HasGroup {
		c.ungroupedMu.Lock()
		if len(c.ungrouped) >= maxUngrouped {
			clear(c.ungrouped)
		}
		c.ungrouped[run.ID] = struct{}{}
		c.ungroupedMu.Unlock()
		return nil
	}
	group, err := RenderGroup(cfg.Group, RunFields(run, event))
	if err != nil {
		return err
	}
	e := &store.ConcurrencyEntry{RunID: run.ID, Scope: run.RepoIdentifier, Group: group, Status: store.ConcurrencyQueued,
		Max: max(cfg.Max, 1), CancelInProgress: cfg.CancelInProgress == nil || *cfg.CancelInProgress, CreatedAt: run.CreatedAt}
	return c.st.InsertConcurrencyEntry(ctx, e)
}

// isUngrouped reports whether EnterGroup was told runID has no group.
func (c *Controller) isUngrouped(runID string) bool {
	c.ungroupedMu.Lock()
	defer c.ungroupedMu.Unlock()
	_, ok := c.ungrouped[runID]
	return ok
}

// Admit implements runs.Subscriber: a run outside any group is always
// admitted (without a read when EnterGroup was told so); a run in a group
// is admitted per the rules above. Store errors admit nothing (the sweeper
// retries).
func (c *Controller) Admit(ctx context.Context, runID string) bool {
	if c.isUngrouped(runID) {
		return true
	}
	c.groupMu.Lock()
	defer c.groupMu.Unlock()
	e, err := c.st.GetConcurrencyEntry(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return true
	}
	if err != nil {
		c.log.Warn("concurrency: read entry", "runId", runID, "err", err)
		return false
	}
	if e.Status != store.ConcurrencyQueued {
		return e.Status == store.ConcurrencyActive
	}
	others, err := c.st.ListConcurrencyEntries(ctx, e.Scope, e.Group, []string{store.ConcurrencyActive, store.ConcurrencyQueued})
	if err != nil {
		c.log.Warn("concurrency: list group", "group", e.Group, "err", err)
		return false
	}
	if e.CancelInProgress {
		for _, o := range others {
			if o.RunID != runID && newer(o, e) {
				// A newer run already owns the group: this one is superseded.
				c.supersede(e, o.RunID)
				return false
			}
		}
		for _, o := range others {
			if o.RunID != runID {
				c.supersede(o, runID)
			}
		}
		return c.activate(ctx, e)
	}
	var active []string
	for _, o := range others {
		if o.Status == store.ConcurrencyActive {
			active = append(active, o.RunID)
		} else if o.RunID != runID && newer(e, o) {
			c.noteWaiting(ctx, runID, waitingReason(e, nil, o.RunID)) // an older run waits first
			return false
		}
	}
	if len(active) >= e.Max {
		c.log.Info("run queued in concurrency group", "runId", runID, "group", e.Group, "active", len(active), "max", e.Max)
		c.noteWaiting(ctx, runID, waitingReason(e, active, ""))
		return false
	}
	return c.activate(ctx, e)
}

// newer reports whether a arrived after b.
func newer(a, b *store.ConcurrencyEntry) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.After(b.CreatedAt)
	}
	return a.RunID > b.RunID
}

func (c *Controller) activate(ctx context.Context, e *store.ConcurrencyEntry) bool {
	ok, err := c.st.SetConcurrencyStatus(ctx, e.RunID, []string{store.ConcurrencyQueued}, store.ConcurrencyActive)
	if err != nil {
		c.log.Warn("concurrency: activate", "runId", e.RunID, "err", err)
		return false
	}
	if ok {
		c.log.Info("run admitted to concurrency group", "runId", e.RunID, "group", e.Group)
		c.noteWaiting(ctx, e.RunID, "")
	}
	return ok
}

// supersede marks e cancelled and cancels its run in the background (the
// caller may hold a tracker run lock).
func (c *Controller) supersede(e *store.ConcurrencyEntry, by string) {
	ctx := context.Background()
	if ok, err := c.st.SetConcurrencyStatus(ctx, e.RunID, []string{store.ConcurrencyActive, store.ConcurrencyQueued}, store.ConcurrencyCancelled); err != nil || !ok {
		return
	}
	reason := fmt.Sprintf("superseded by run %s in concurrency group '%s'", by, e.Group)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		run, err := c.st.GetRun(ctx, e.RunID)
		if err != nil || run.Status.IsTerminal() {
			return
		}
		if _, err := c.cancel(ctx, run, reason, false); err != nil {
			c.log.Error("concurrency: cancel superseded run", "runId", e.RunID, "err", err)
		}
	}()
}

// RunFinished releases a finished run's slot and admits the next waiting
// runs of its group (runs.Subscriber).
func (c *Controller) RunFinished(run *store.Run) {
	c.ungroupedMu.Lock()
	_, none := c.ungrouped[run.ID]
	delete(c.ungrouped, run.ID)
	c.ungroupedMu.Unlock()
	if none {
		return // no slot to release, no group to promote
	}
	ctx := context.Background()
	ok, err := c.st.SetConcurrencyStatus(ctx, run.ID, []string{store.ConcurrencyActive, store.ConcurrencyQueued}, store.ConcurrencyCompleted)
	if err != nil || !ok {
		if e, gerr := c.st.GetConcurrencyEntry(ctx, run.ID); gerr == nil {
			c.wg.Add(1)
			go func() { defer c.wg.Done(); c.promote(ctx, e.Scope, e.Group) }()
		}
		return
	}
	e, err := c.st.GetConcurrencyEntry(ctx, run.ID)
	if err != nil {
		return
	}
	c.log.Info("concurrency slot released", "runId", run.ID, "group", e.Group, "status", run.Status)
	c.wg.Add(1)
	go func() { defer c.wg.Done(); c.promote(ctx, e.Scope, e.Group) }()
}

// promote admits waiting runs of a group while slots are free and releases
// their jobs.
func (c *Controller) promote(ctx context.Context, scope, group string) {
	c.groupMu.Lock()
	list, err := c.st.ListConcurrencyEntries(ctx, scope, group, []string{store.ConcurrencyActive, store.ConcurrencyQueued})
	var admitted []string
	if err == nil {
		active := 0
		for _, e := range list {
			if e.Status == store.ConcurrencyActive {
				active++
			}
		}
		for _, e := range list {
			if e.Status != store.ConcurrencyQueued || active >= e.Max {
				continue
			}
			if c.activate(ctx, e) {
				active++
				admitted = append(admitted, e.RunID)
			}
		}
		c.noteHolders(ctx, list, admitted)
	}
	c.groupMu.Unlock()
	for _, id := range admitted {
		if err := c.tr.Reevaluate(ctx, id); err != nil {
			c.log.Error("concurrency: release admitted run", "runId", id, "err", err)
		}
	}
}

// reconcileGroups frees the slots of runs that ended without releasing
// them (e.g. across a restart) and admits waiting runs.
func (c *Controller) reconcileGroups(ctx context.Context) {
	list, err := c.st.ListConcurrencyEntries(ctx, "", "", []string{store.ConcurrencyActive, store.ConcurrencyQueued})
	if err != nil {
		return
	}
	groups := map[[2]string]bool{}
	for _, e := range list {
		run, err := c.st.GetRun(ctx, e.RunID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && run.Status.IsTerminal()) {
			_, _ = c.st.SetConcurrencyStatus(ctx, e.RunID, []string{store.ConcurrencyActive, store.ConcurrencyQueued}, store.ConcurrencyCompleted)
		}
		if e.Status == store.ConcurrencyQueued || err != nil || run.Status.IsTerminal() {
			groups[[2]string{e.Scope, e.Group}] = true
		}
	}
	for g := range groups {
		c.promote(ctx, g[0], g[1])
	}
}

var _ runs.Subscriber = (*Controller)(nil)
