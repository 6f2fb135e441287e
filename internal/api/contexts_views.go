package api

import (
	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/store"
)

// The context routes answer with apitypes shapes, never store rows, so a
// column rename in the store cannot change the API and the JSON stays
// camelCase.

func contextView(c *store.Context) apitypes.Context {
	return apitypes.Context{
		ID: c.ID, OrgID: c.OrgID, Name: c.Name, Type: c.Type, GlobPattern: c.GlobPattern, Enabled: c.Enabled,
		BranchRestrictions: c.BranchRestrictions, RequiredReviewers: c.RequiredReviewers,
		WaitTimerSeconds: c.WaitTimerSeconds, HoldExpirySeconds: c.HoldExpirySeconds, MinimumTrust: c.MinimumTrust,
		AllowLocalExecution: c.AllowLocalExecution, TriggerTypeFilters: c.TriggerTypeFilters,
		RepoPatterns: c.RepoPatterns, ConcurrencyLimit: c.ConcurrencyLimit, ConcurrencyStrategy: c.ConcurrencyStrategy,
		ConcurrencyTimeoutMs: c.ConcurrencyTimeoutMs, AllowUntrusted: c.AllowUntrusted,
		CreatedBy: c.CreatedBy, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt,
	}
}

func variableViews(vs []*store.ContextVariable) []apitypes.ContextVariable {
	out := make([]apitypes.ContextVariable, 0, len(vs))
	for _, v := range vs {
		out = append(out, apitypes.ContextVariable{Key: v.Key, Value: v.Value, Locked: v.Locked, UpdatedAt: v.UpdatedAt})
	}
	return out
}

func bindingViews(bs []*store.ContextBinding) []apitypes.ContextBinding {
	out := make([]apitypes.ContextBinding, 0, len(bs))
	for _, b := range bs {
		out = append(out, apitypes.ContextBinding{ScopePattern: b.ScopePattern, HostPattern: b.HostPattern, CreatedAt: b.CreatedAt})
	}
	return out
}

func overrideViews(os []*store.ContextSourceOverride) []apitypes.ContextSourceOverride {
	out := make([]apitypes.ContextSourceOverride, 0, len(os))
	for _, o := range os {
		out = append(out, apitypes.ContextSourceOverride{RoutingKey: o.RoutingKey, Key: o.Key, Value: o.Value, UpdatedAt: o.UpdatedAt})
	}
	return out
}
