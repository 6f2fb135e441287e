package ingest

// The steps a forge delivery takes whatever the forge (GitHub through its
// REST API, universal-git through git): each forge's handler reads its own
// payload and lock, and goes through these for the rules they share.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"kici.dev/kici/internal/ghapi"
	"kici.dev/kici/internal/lockfetch"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trigger"
)

// screenForgeEvent applies the org's fork policy to ev and drops the commit
// statuses kici posted itself. It returns the fork policy that applies when
// ev is a pull request from a fork, whether it is one, and whether the
// delivery stops here (tr's summary then says why).
func (p *Processor) screenForgeEvent(ctx context.Context, tr *Trace, src *store.Source, ev *trigger.Event) (forkPolicy string, fork, stop bool) {
	forkPolicy, fork = p.forkPolicy(ctx, src.OrgID, ev)
	if fork && forkPolicy == store.ForkIgnore {
		p.countForkIgnored()
		tr.Summary = forkIgnoredSummary
		return forkPolicy, fork, true
	}
	if ownStatus(ev) {
		tr.Summary = ownStatusSummary
		return forkPolicy, fork, true
	}
	return forkPolicy, fork, false
}

// forkBaseLock returns the base branch whose lock a pull request from a
// fork runs with, and the trace note that says so. A fork's lock file is
// the contributor's to write: the base branch's is read whatever the
// policy (as KiCI does: allow runs with the base lock; hold runs it once
// approved).
func forkBaseLock(forkPolicy string, ev *trigger.Event, lref provider.LockRef) (base, note string) {
	base = lref.BaseRef
	if base == "" {
		base = ev.BaseBranch
	}
	return base, fmt.Sprintf("pull request from a fork (trust tier unknown, fork policy %q): using the lock of base branch %s", forkPolicy, base)
}

// usableLock maps a lock-cache outcome to the lock to match. A missing lock
// ends the delivery without runs (nil lock, nil error; the summary names
// shown, the lock's ref, after the trace notes); a corrupt or oversized
// one fails it. tr's lock status records either.
func usableLock(tr *Trace, res lockfetch.Result, shown string, notes []string) (*lockfile.LockFile, error) {
	switch res.Status {
	case lockfetch.StatusMissing:
		tr.LockStatus = LockMissing
		tr.Summary = strings.Join(append(notes, "no lock file at "+shown), "; ")
		return nil, nil
	case lockfetch.StatusCorrupt:
		tr.LockStatus = LockCorrupt
		return nil, fmt.Errorf("%s: invalid lock file at %s: %s", LockCorrupt, shown, res.Detail)
	case lockfetch.StatusTooLarge:
		tr.LockStatus = LockTooLarge
		return nil, fmt.Errorf("%s: %s", LockTooLarge, res.Detail)
	}
	return res.Lock, nil
}

// gitHubLockFetch reads the lock file of repo at ref through client (with
// installation inst for an App), in the lock cache's terms.
func gitHubLockFetch(client *ghapi.Client, inst int64, repo, ref string) lockfetch.Fetch {
	return func(ctx context.Context, maxBytes int64) ([]byte, error) {
		b, err := client.GetFile(ctx, inst, repo, lockfetch.LockPath, ref, maxBytes)
		switch {
		case errors.Is(err, ghapi.ErrNotFound):
			return nil, lockfetch.ErrMissing
		case errors.Is(err, ghapi.ErrTooLarge):
			return nil, lockfetch.ErrTooLarge
		}
		return b, err
	}
}

// createForgeRuns matches the lock's workflows against ev and, when none
// failed, the org's organization-wide ones, every run built from rc (with
// the trust tier of a commit-only event, when commit is set). The trace
// notes, why the lock was read where it was, lead the summary.
func (p *Processor) createForgeRuns(ctx context.Context, d *store.Delivery, tr *Trace, src *store.Source, ev *trigger.Event,
	lf *lockfile.LockFile, rc RunContext, commit *commitEvent, notes []string, b *stagedRuns) error {
	if commit != nil {
		rc.TrustTier = commit.tier
	}
	err := p.matchAndCreate(ctx, d, tr, lf.Workflows, ev, func(*lockfile.Workflow) RunContext { return rc }, b)
	if err == nil {
		err = p.matchOrgWide(ctx, d, tr, src, ev, rc, b)
	}
	if len(notes) > 0 {
		tr.Summary = strings.Join(notes, "; ") + "; " + tr.Summary
	}
	return err
}
