package ingest

import (
	"context"
	"fmt"
	"strings"

	"kici.dev/kici/internal/forgestatus"
	"kici.dev/kici/internal/lockfetch"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trigger"
)

// commitEvent is how a delivery that names a commit without naming a
// trusted ref is run: a GitHub `status` (any forge or custom mapping that
// yields one), or any other event whose lock ref is a bare commit id
// rather than a pushed branch, a tag, a pull request or a release.
//
// Anyone who can get a commit into the repository's object store (a fork's
// pull request head is enough) can have a status posted on it, so that
// commit's lock file is never read: the lock is the default branch's (the
// rule GitHub Actions applies to `status`), the run checks out the named
// commit, and the run is trusted only when the payload lists a branch of
// the base repository containing the commit (GitHub's `branches`, which
// it fills from the base repository's own branches). Otherwise the tier
// is unknown: the org's fork policy applies as to a fork pull request
// (hold for approval, allow without secrets, or ignore).
type commitEvent struct {
	// tier is store.TrustTrusted or store.TrustUnknown.
	tier string
	// note explains the decision in the delivery's trace.
	note string
}

// ownStatus reports a status event for a commit status kici posted
// itself (context "kici/<workflow>/<job>"): those never start a run, so
// a workflow on `status` cannot feed itself and a held fork head's
// "waiting for approval" status starts nothing.
func ownStatus(ev *trigger.Event) bool {
	ctxName, _ := ev.Payload["context"].(string)
	return ev.Type == trigger.KindStatus && strings.HasPrefix(ctxName, forgestatus.StatusContextPrefix)
}

// ownStatusSummary is the trace summary of an ignored kici status.
const ownStatusSummary = "ignored: a commit status kici posted itself (context " + forgestatus.StatusContextPrefix + "…) never starts a run"

// namesCommitOnly reports whether ev names a commit without naming a
// trusted ref (see commitEvent): a status, or an event of another kind
// whose lock ref is a commit id. Pushes, tags, pull requests (their own
// fork rule applies) and releases (only writers create them) are not.
func namesCommitOnly(ev *trigger.Event, lref provider.LockRef) bool {
	switch ev.Type {
	case trigger.KindStatus:
		return true
	case trigger.KindPush, trigger.KindTag, trigger.KindPullRequest, trigger.KindReview, trigger.KindReviewComment, trigger.KindRelease:
		return false
	}
	return lockfetch.IsSHA(lref.Ref)
}

// decideCommitEvent returns the tier of a commit-only event (see
// commitEvent), and whether the org's fork policy drops it (ignored: the
// trace summary is then set).
func (p *Processor) decideCommitEvent(ctx context.Context, tr *Trace, orgID string, ev *trigger.Event, lref provider.LockRef, defaultBranch string) (commitEvent, bool) {
	branch := orHead(defaultBranch)
	if b := onBaseBranch(ev.Payload); b != "" {
		return commitEvent{tier: store.TrustTrusted,
			note: fmt.Sprintf("%s event for commit %s (on branch %s of the repository): using the lock of %s", ev.Type, lref.Ref, b, branch)}, false
	}
	pol := p.effectiveForkPolicy(ctx, orgID)
	if pol == store.ForkIgnore {
		p.countForkIgnored()
		tr.Summary = fmt.Sprintf("%s event for commit %s, which is on no branch of the repository, ignored: the trust policy's fork policy is \"ignore\"", ev.Type, orHead(lref.Ref))
		return commitEvent{}, true
	}
	return commitEvent{tier: store.TrustUnknown,
		note: fmt.Sprintf("%s event for commit %s, which is on no branch of the repository (trust tier unknown, fork policy %q): using the lock of %s", ev.Type, orHead(lref.Ref), pol, branch)}, false
}

// onBaseBranch returns the first branch the payload's `branches` lists
// (GitHub's status event: branches of the base repository that contain
// the commit), "" when it lists none.
func onBaseBranch(payload map[string]any) string {
	bs, _ := payload["branches"].([]any)
	for _, b := range bs {
		if m, ok := b.(map[string]any); ok {
			if name, _ := m["name"].(string); name != "" {
				return name
			}
		}
	}
	return ""
}
