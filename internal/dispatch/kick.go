package dispatch

import (
	"context"
	"slices"
	"time"

	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/store"
)

// Close reasons sent with auth.failure when a live token stops being valid
// (KiCI's agent registry kick path; see docs/kici-compatibility.md#agent-protocol).
// The agent does not reconnect after close code 4010.
const (
	ReasonTokenRevoked = "Token revoked"
	ReasonTokenExpired = "Token expired"
)

// kickToken closes the sockets of token tokenID with reason (KickToken).
func (r *registry) kickToken(tokenID, reason string) int {
	if tokenID == "" {
		return 0
	}
	r.mu.Lock()
	var victims []*agentConn
	for c := range r.conns {
		if c.tokenID == tokenID {
			victims = append(victims, c)
		}
	}
	r.mu.Unlock()
	for _, c := range victims {
		r.log.Warn("closing agent connection: its token is no longer valid", "agent", c.id, "tokenId", tokenID, "reason", reason)
		r.authFail(c, protocol.CloseAuthFailed, reason)
	}
	return len(victims)
}

// watchToken binds socket c to tok right after authentication, so that a
// later KickToken reaches it, and re-reads the token to close the window in
// which a revocation stored between validation and binding would be missed.
// It also loads the token's mandatory labels (the agent's taint).
// A static token with an expiry gets a timer that kicks it at that instant
// (ephemeral tokens are single-agent and live for their job; they are not
// cut off mid-job). It reports false when the socket is being closed.
func (r *registry) watchToken(ctx context.Context, c *agentConn, tok *store.AgentToken) bool {
	mandatory, err := r.st.AgentTokenMandatoryLabels(ctx, tok.ID)
	if err != nil {
		r.log.Error("agent token mandatory labels", "tokenId", tok.ID, "err", err)
		c.close(protocol.CloseInternalError, "authentication unavailable")
		return false
	}
	r.mu.Lock()
	c.tokenID = tok.ID
	c.mandatory = mandatory
	r.mu.Unlock()
	cur, err := r.st.GetAgentTokenByHash(ctx, tok.TokenHash)
	if err == nil && cur.RevokedAt != nil {
		r.authFail(c, protocol.CloseAuthFailed, ReasonTokenRevoked)
		return false
	}
	if tok.Kind == store.AgentTokenStatic && tok.ExpiresAt != nil {
		t := time.AfterFunc(time.Until(*tok.ExpiresAt), func() {
			r.mu.Lock()
			open := r.conns[c]
			r.mu.Unlock()
			if open {
				r.log.Warn("closing agent connection: token expired", "agent", c.id, "tokenId", tok.ID)
				r.authFail(c, protocol.CloseAuthFailed, ReasonTokenExpired)
			}
		})
		go func() {
			<-c.closeDone
			t.Stop()
		}()
	}
	return true
}

// AgentFacts describe the agent a job is being dispatched to, for context
// bindings whose host pattern names agents (KiCI context_bindings
// host_pattern: agent id, hostname or labels).
type AgentFacts struct {
	ID       string
	Hostname string
	Labels   []string
	// TokenLabels is the label scope the agent's token was minted with
	// (nil: an unscoped static token). Unlike Labels, which the agent
	// reports (platform labels such as kici:host:* are exempt from the
	// scope), these are the operator's or the scaler's word.
	TokenLabels []string
}

// JobData is what the orchestrator resolves for one job.dispatch: the
// values of the secrets its steps declare, keyed by reference
// "<scope>:<key>", and the merged variables of its contexts.
type JobData struct {
	Secrets     map[string]string
	ContextVars map[string]string
	// JobCredential is the job's credential for the cache and artifact
	// routes (protocol.JobDispatch.JobCredential).
	JobCredential string
}

// JobDataResolver resolves a job's secrets and context variables at
// dispatch, for the agent it goes to. A secret reference it may not or
// cannot resolve is left out (the agent then fails the steps that need it,
// with a clear message); an error means the values could not be read now,
// and the dispatch is retried later.
type JobDataResolver func(ctx context.Context, run *store.Run, job *store.Job, agent AgentFacts) (JobData, error)

// withMandatory returns labels plus every mandatory label not already in
// it: an agent carries its token's mandatory labels.
func withMandatory(labels, mandatory []string) []string {
	out := append([]string{}, labels...)
	for _, m := range mandatory {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// agentFitsLocked reports whether agent a may run entry e (agentFits).
// Caller holds registry.mu.
func agentFitsLocked(a *agentConn, e *store.QueueEntry) bool {
	return agentFits(a.labels, a.mandatory, a.tokenLabels, e.RunsOnLabels, e.ExcludeLabels)
}

// agentFits reports whether an agent with labels, its token's mandatory
// labels and its token's label scope (tokenLabels, nil when unscoped) may
// run a job asking for runsOn and excluding exclude: its labels match, the
// job asks for every mandatory label (KiCI mandatory_labels, a taint: a
// tainted agent only runs jobs that target it explicitly), and every
// kici:host:* label the job pins is in the token's scope (UnvouchedHost:
// an agent merely claiming the host is not sent the job).
func agentFits(labels, mandatory, tokenLabels, runsOn, exclude []string) bool {
	if !labelsMatch(labels, runsOn, exclude) || UnvouchedHost(runsOn, tokenLabels) != "" {
		return false
	}
	for _, m := range mandatory {
		if !slices.Contains(runsOn, m) {
			return false
		}
	}
	return true
}
