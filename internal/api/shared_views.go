package api

import (
	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/scaler"
	"kici.dev/kici/internal/store"
)

// The store's rows that the admin API serves as they are (ClusterNode,
// Registration, Context, …) are apitypes types; the store declares them as
// aliases. Only rows with a field that is never served (a payload, a sealed
// key) keep a store type of their own and are copied here.

// derefAll copies the rows ps points at; never nil, so an empty list is
// JSON [] rather than null.
func derefAll[T any](ps []*T) []T {
	out := make([]T, 0, len(ps))
	for _, p := range ps {
		out = append(out, *p)
	}
	return out
}

// orEmpty is s, or an empty slice for nil, so the list is JSON [] rather
// than null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// mapSlice converts every element of in with f; never nil, so an empty
// list is JSON [] rather than null.
func mapSlice[S, D any](in []S, f func(S) D) []D {
	out := make([]D, 0, len(in))
	for _, v := range in {
		out = append(out, f(v))
	}
	return out
}

func scalersView(st scaler.Status) apitypes.ScalersView {
	return apitypes.ScalersView{GlobalMaxAgents: st.GlobalMaxAgents, Active: st.Active, Reloads: st.Reloads,
		Scalers: mapSlice(st.Scalers, scalerView)}
}

// scalerView copies sc; LabelSets stays null for a scaler without label
// sets.
func scalerView(sc scaler.ScalerStatus) apitypes.ScalerView {
	return apitypes.ScalerView{Name: sc.Name, Type: string(sc.Type), Retiring: sc.Retiring, State: string(sc.State), StateReason: sc.StateReason,
		Accel: string(sc.Accel), BootMs: sc.BootMs, AccelNote: sc.AccelNote, MaxAgents: sc.MaxAgents, MaxConcurrentSpawns: sc.MaxConcurrentSpawns, LabelSets: sc.LabelSets, Active: sc.Active,
		Spawning: sc.Spawning, Queued: sc.Queued, SpawnedTotal: sc.SpawnedTotal, FailedTotal: sc.FailedTotal,
		RefusedTotal: sc.RefusedTotal, Agents: mapSlice(sc.Agents, func(a scaler.AgentStatus) apitypes.ScalerAgentView {
			return apitypes.ScalerAgentView{AgentID: a.AgentID, JobID: a.JobID, RunID: a.RunID, State: string(a.State), Warm: a.Warm, CreatedAt: a.CreatedAt}
		})}
}

// eventLogEntryView copies e without its stored gzipped payload.
func eventLogEntryView(e *store.EventLogEntry) apitypes.EventLogEntry {
	return apitypes.EventLogEntry{
		ID: e.ID, DeliveryID: e.DeliveryID, OrgID: e.OrgID, SourceID: e.SourceID, RoutingKey: e.RoutingKey, Event: e.Event,
		Action: e.Action, Source: e.Source, Provider: e.Provider, RepoIdentifier: e.RepoIdentifier, Ref: e.Ref, Status: e.Status,
		MatchedCount: e.MatchedCount, RunIDs: e.RunIDs, ErrorMessage: e.ErrorMessage, PayloadSizeBytes: e.PayloadSizeBytes,
		PayloadHash: e.PayloadHash, PayloadOmittedReason: e.PayloadOmittedReason, ReceivedAt: e.ReceivedAt, ProcessedAt: e.ProcessedAt,
	}
}

// signingKeyView is k without its sealed private half.
func signingKeyView(k *store.SigningKey) apitypes.SigningKey {
	return apitypes.SigningKey{Kid: k.Kid, PublicJWK: k.PublicJWK, Alg: k.Alg, SignerKind: k.SignerKind, Status: k.Status,
		RevocationReason: k.RevocationReason, CreatedAt: k.CreatedAt, ActivatedAt: k.ActivatedAt, RetiredAt: k.RetiredAt, RevokedAt: k.RevokedAt}
}
