package ingest

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"kici.dev/kici/internal/approval"
	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/provider/universal"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trigger"
	"kici.dev/kici/internal/trustpolicy"
)

// Decider commits a decision on a hold (approval.Decider.Decide).
type Decider func(ctx context.Context, d approval.Decision) (approval.Result, error)

func (p *Processor) countForkIgnored() {
	if p.forkIgnored != nil {
		p.forkIgnored()
	}
}

func (p *Processor) getDecider() Decider { return p.decider }

// directoryProvider maps an event's provider (GitHub, or a universal-git
// preset) to the provider name approval-directory links use: github,
// gitea (also Forgejo and Gogs) or gitlab; "" when comments from that
// provider cannot be matched to a directory member.
func directoryProvider(eventProvider provider.Name) string {
	switch eventProvider {
	case provider.GitHub, universal.PresetGitHubRepo:
		return "github"
	case universal.PresetGitea, universal.PresetForgejo, universal.PresetGogs:
		return "gitea"
	case universal.PresetGitLabRepo, "gitlab":
		return "gitlab"
	}
	return ""
}

// kiciCommand matches a `/kici approve <runId>` or `/kici reject <runId>
// [reason]` comment (the first line; the run id is a uuid).
var kiciCommand = regexp.MustCompile(`^\s*/kici\s+(approve|reject)\s+([0-9a-fA-F-]{36})\b[ \t]*(.*)`)

// forkIgnoredSummary is the trace summary (and event-log explanation) of a
// fork pull request dropped by policy.
const forkIgnoredSummary = `pull request from a fork ignored: the trust policy's fork policy is "ignore" (kici-admin trust-policy set --fork-policy hold)`

// forkPolicy returns the fork policy that applies to ev's org, and whether
// ev is a pull request from a fork at all. A policy read error holds (KiCI).
func (p *Processor) forkPolicy(ctx context.Context, orgID string, ev *trigger.Event) (policy string, fork bool) {
	if !ev.IsForkPR {
		return "", false
	}
	return p.effectiveForkPolicy(ctx, orgID), true
}

// effectiveForkPolicy is the fork policy of orgID's trust policy; hold
// when it cannot be read (KiCI).
func (p *Processor) effectiveForkPolicy(ctx context.Context, orgID string) string {
	pol, _, err := trustpolicy.Effective(ctx, p.st, orgID)
	if err != nil {
		p.log.Error("ingest: trust policy unreadable; holding untrusted runs", "orgId", orgID, "error", err)
		return store.ForkHold
	}
	return pol.ForkPolicy
}

// handleKiciComment acts on a `/kici approve|reject <runId>` comment (KiCI
// approval comments, security queue only): the commenter is looked up in
// the org's approval directory strictly by the provider's immutable user
// id and must have CI trust write or admin; the run must belong to the
// comment's repository and have a pending security hold. handled is false
// when the comment is not such a command (it is then matched against
// workflows as usual).
func (p *Processor) handleKiciComment(ctx context.Context, tr *Trace, src *store.Source, ev *trigger.Event, body string) (handled bool) {
	decide := p.getDecider()
	dirProvider := directoryProvider(ev.Provider)
	if decide == nil || ev.Type != trigger.KindComment || dirProvider == "" {
		return false
	}
	first, _, _ := strings.Cut(body, "\n")
	m := kiciCommand.FindStringSubmatch(first)
	if m == nil {
		return false
	}
	// The reason is the commenter's text: keep it printable.
	verb, runID, reason := m[1], strings.ToLower(m[2]), strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, m[3]))
	refuse := func(why string) bool {
		tr.Summary = fmt.Sprintf("/kici %s %s from %q refused: %s", verb, runID, ev.SenderUsername, why)
		p.log.Warn("ingest: "+tr.Summary, "sourceId", src.ID)
		p.reply(ctx, src, ev, fmt.Sprintf("kici: `/kici %s %s` from @%s was refused: %s.", verb, runID, ev.SenderUsername, why))
		return true
	}
	if ev.SenderUserID == 0 {
		return refuse("the comment carries no user id")
	}
	member, err := p.st.FindDirectoryMember(ctx, src.OrgID, dirProvider, strconv.FormatInt(ev.SenderUserID, 10))
	if errors.Is(err, store.ErrNotFound) {
		return refuse("the commenter is not in the approval directory (kici-admin trust-policy directory-set)")
	}
	if err != nil {
		return refuse("directory lookup failed: " + err.Error())
	}
	if member.CITrust != store.CITrustWrite && member.CITrust != store.CITrustAdmin {
		return refuse(fmt.Sprintf("the commenter's CI trust is %q (write or admin required)", member.CITrust))
	}
	run, err := p.st.GetRun(ctx, runID)
	if err != nil || run.OrgID != src.OrgID || run.RepoIdentifier != ev.SourceRepo {
		return refuse("no such run in this repository")
	}
	holds, err := p.st.ListHeldRuns(ctx, store.HeldRunFilter{OrgID: src.OrgID, RunID: runID, Statuses: []hold.Status{hold.Pending}})
	if err != nil {
		return refuse("reading holds failed: " + err.Error())
	}
	var held *store.HeldRun
	for _, h := range holds {
		if h.QueueType == hold.QueueSecurity {
			held = h
			break
		}
	}
	if held == nil {
		return refuse("the run has no pending security hold")
	}
	res, err := decide(ctx, approval.Decision{
		OrgID: src.OrgID, HeldRunID: held.ID, Decision: approval.DecisionWord(verb), Reason: reason, Approver: member.UserID,
		ActorTokenLabel: dirProvider + ":" + ev.SenderUsername,
	})
	if err != nil {
		return refuse(err.Error())
	}
	tr.Summary = fmt.Sprintf("/kici %s %s by %s (%s): hold %s", verb, runID, ev.SenderUsername, member.UserID, res.Status)
	p.log.Info("ingest: "+tr.Summary, "sourceId", src.ID, "heldRunId", held.ID)
	p.reply(ctx, src, ev, decisionReply(verb, runID, ev.SenderUsername, res.Status))
	return true
}
