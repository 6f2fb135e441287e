// Package jobdata resolves, when a job is dispatched, what its agent gets
// besides the job itself: the context variables (merged last-wins, locked
// ones kept), the secrets a passing context grants on that agent, and the
// job credential for caches and artifacts. Dispatch calls it through
// dispatch.JobDataResolver; it sits above dispatch, approval, contexts and
// secrets, which it combines.
package jobdata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"kici.dev/kici/internal/approval"
	"kici.dev/kici/internal/contexts"
	"kici.dev/kici/internal/dispatch"
	"kici.dev/kici/internal/jobblobs"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/secrets"
	"kici.dev/kici/internal/store"
)

// NewResolver resolves, at dispatch, a job's context variables and the
// secrets its steps declare (KiCI dispatch-time resolution, on pass).
//
// The job's contexts are matched again and each must still pass its hard
// gates (a context disabled or restricted since the job was released
// contributes nothing). Variables merge last-wins in bound order, locked
// variables keeping their value over source overrides. A declared secret
// `<scope>:<key>` is resolved only when a binding of one of those contexts
// grants the scope on this agent, and — for a run of trust tier unknown (a
// fork pull request) — only from a context that allows untrusted runs.
// A job whose runsOn pins kici:host:X gets no secret at all on an agent
// whose token's label scope does not list kici:host:X
// (dispatch.UnvouchedHost). Routing already sends it only to such an
// agent; this second check keeps the secrets safe should a dispatch path
// ever skip that rule.
// Anything not granted is left out: the agent fails the steps that need it
// with "secrets not available", and the resolver logs why. A nil logger
// discards logs.
func NewResolver(st store.Store, svc *secrets.Service, logger *slog.Logger) dispatch.JobDataResolver {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return func(ctx context.Context, run *store.Run, job *store.Job, agent dispatch.AgentFacts) (dispatch.JobData, error) {
		var lj lockfile.Job
		if len(job.Config) > 0 {
			if err := json.Unmarshal(job.Config, &lj); err != nil {
				return dispatch.JobData{}, fmt.Errorf("job config: %w", err)
			}
		}
		routingKey := ""
		if len(lj.Contexts) > 0 && run.SourceID != "" { // only source overrides need it
			src, err := st.GetSource(ctx, run.SourceID)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return dispatch.JobData{}, err
			}
			if src != nil {
				routingKey = src.RoutingKey
			}
		}
		facts := approval.Facts(run, routingKey)
		granted, err := passingContexts(ctx, st, facts, lj.Contexts)
		if err != nil {
			return dispatch.JobData{}, err
		}
		var data dispatch.JobData
		var bindings []*store.ContextBinding
		layers := make([]contexts.VarLayer, 0, len(granted))
		for _, c := range granted {
			vars, err := st.ListContextVariables(ctx, c.OrgID, c.Name)
			if err != nil {
				return dispatch.JobData{}, err
			}
			overrides, err := st.ListContextSourceOverrides(ctx, c.OrgID, c.Name, routingKey)
			if err != nil {
				return dispatch.JobData{}, err
			}
			if routingKey == "" {
				overrides = nil
			}
			layers = append(layers, contexts.VarLayer{Variables: vars, Overrides: overrides})
			if !contexts.SecretsAllowed(c, facts) {
				continue
			}
			bs, err := st.ListContextBindings(ctx, c.OrgID, c.Name)
			if err != nil {
				return dispatch.JobData{}, err
			}
			for _, b := range bs {
				nb := *b
				nb.ScopePattern = strings.TrimPrefix(nb.ScopePattern, "pg:")
				bindings = append(bindings, &nb)
			}
		}
		if len(layers) > 0 {
			data.ContextVars = contexts.MergeVariables(layers)
		}
		refs := declaredSecrets(&lj)
		if len(refs) == 0 || svc == nil {
			return data, nil
		}
		if host := dispatch.UnvouchedHost(job.RunsOnLabels, agent.TokenLabels); host != "" {
			logger.Warn("secrets withheld: the job pins a host label the agent's token was not minted for "+
				"(kici-admin agent register --labels "+host+" on that host)",
				"runId", run.ID, "jobId", job.ID, "agentId", agent.ID, "label", host, "secrets", refs)
			return data, nil
		}
		var denied []string
		for _, ref := range refs {
			scope, key, err := secrets.ParseRef(ref)
			if err != nil {
				continue // the agent reports the unresolved reference
			}
			if !contexts.ScopeGranted(bindings, scope, contexts.AgentFacts{ID: agent.ID, Hostname: agent.Hostname, Labels: agent.Labels}) {
				denied = append(denied, ref)
				continue
			}
			v, err := svc.Resolve(ctx, run.OrgID, scope, key, "job:"+job.ID)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return dispatch.JobData{}, err
			}
			if data.Secrets == nil {
				data.Secrets = map[string]string{}
			}
			data.Secrets[ref] = v
		}
		if len(denied) > 0 {
			logger.Warn("secrets not granted to the job: no context it names (and passes) binds their scope on this agent",
				"runId", run.ID, "jobId", job.ID, "agentId", agent.ID, "trustTier", run.TrustTier, "secrets", denied)
		}
		return data, nil
	}
}

// passingContexts matches a job's declared context names and keeps, in
// bound order, those that pass every hard gate for the run.
func passingContexts(ctx context.Context, st store.Store, facts contexts.RunFacts, names []string) ([]*store.Context, error) {
	if len(names) == 0 {
		return nil, nil
	}
	bound, _, err := contexts.Resolve(ctx, st, facts.OrgID, names)
	if err != nil {
		return nil, err
	}
	var out []*store.Context
	for _, b := range bound {
		if contexts.CheckGates(facts, []contexts.Bound{b}) == nil {
			out = append(out, b.Context)
		}
	}
	return out, nil
}

// declaredSecrets returns the distinct secret references of a job and its
// steps, sorted.
func declaredSecrets(lj *lockfile.Job) []string {
	set := map[string]bool{}
	for _, ref := range lj.Secrets {
		set[ref] = true
	}
	if lj.GitCredentials != "" {
		set[lj.GitCredentials] = true
	}
	for _, s := range lj.Steps {
		for _, ref := range s.Secrets {
			set[ref] = true
		}
	}
	out := make([]string, 0, len(set))
	for ref := range set {
		out = append(out, ref)
	}
	sort.Strings(out)
	return out
}

// WithJobCredential adds a fresh job credential (caches and artifacts,
// package jobblobs) to every dispatch resolved by next.
func WithJobCredential(next dispatch.JobDataResolver, svc *jobblobs.Service) dispatch.JobDataResolver {
	return func(ctx context.Context, run *store.Run, job *store.Job, agent dispatch.AgentFacts) (dispatch.JobData, error) {
		data, err := next(ctx, run, job, agent)
		if err != nil {
			return data, err
		}
		data.JobCredential, err = svc.IssueCredential(ctx, job.ID)
		return data, err
	}
}
