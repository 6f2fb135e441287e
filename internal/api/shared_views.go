package api

import (
	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/runctl"
	"kici.dev/kici/internal/scaler"
	"kici.dev/kici/internal/store"
)

// Conversions from the server's rows to the apitypes shapes that repeat
// them (apitypes/shared.go). The types are field-for-field identical, so a
// Go conversion copies them; a field added to one side only stops these
// conversions from compiling, which is the point.

// mapSlice converts every element of in with f; never nil, so an empty
// list is JSON [] rather than null.
func mapSlice[S, D any](in []S, f func(S) D) []D {
	out := make([]D, 0, len(in))
	for _, v := range in {
		out = append(out, f(v))
	}
	return out
}

func clusterNodeViews(ns []*store.ClusterNode) []apitypes.ClusterNode {
	return mapSlice(ns, func(n *store.ClusterNode) apitypes.ClusterNode { return apitypes.ClusterNode(*n) })
}

func drainView(d runctl.DrainStatus) apitypes.DrainStatus { return apitypes.DrainStatus(d) }

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

func clauseViews(cs []store.ApprovalClause) []apitypes.ApprovalClause {
	return mapSlice(cs, func(c store.ApprovalClause) apitypes.ApprovalClause { return apitypes.ApprovalClause(c) })
}

func approvalViews(as []store.HeldRunApproval) []apitypes.HeldRunApproval {
	return mapSlice(as, func(a store.HeldRunApproval) apitypes.HeldRunApproval { return apitypes.HeldRunApproval(a) })
}

func needViews(ns []store.Need) []apitypes.Need {
	return mapSlice(ns, func(n store.Need) apitypes.Need { return apitypes.Need(n) })
}

// eventLogEntryView copies e without its stored gzipped payload.
func eventLogEntryView(e *store.EventLogEntry) apitypes.EventLogEntry {
	return apitypes.EventLogEntry{
		ID: e.ID, DeliveryID: e.DeliveryID, OrgID: e.OrgID, SourceID: e.SourceID, RoutingKey: e.RoutingKey, Event: e.Event,
		Action: e.Action, Source: e.Source, Provider: e.Provider, RepoIdentifier: e.RepoIdentifier, Ref: e.Ref, Status: string(e.Status),
		MatchedCount: e.MatchedCount, RunIDs: e.RunIDs, ErrorMessage: e.ErrorMessage, PayloadSizeBytes: e.PayloadSizeBytes,
		PayloadHash: e.PayloadHash, PayloadOmittedReason: e.PayloadOmittedReason, ReceivedAt: e.ReceivedAt, ProcessedAt: e.ProcessedAt,
	}
}

func rejectedViews(rs []*store.RejectedDelivery) []apitypes.RejectedDelivery {
	return mapSlice(rs, func(r *store.RejectedDelivery) apitypes.RejectedDelivery { return apitypes.RejectedDelivery(*r) })
}

func registrationView(g *store.Registration) apitypes.Registration { return apitypes.Registration(*g) }

func accessLogViews(es []*store.AccessLogEntry) []apitypes.AccessLogEntry {
	return mapSlice(es, func(e *store.AccessLogEntry) apitypes.AccessLogEntry { return apitypes.AccessLogEntry(*e) })
}

// attestationView is an attestation as listed (the list carries no bundle)
// or fetched.
func attestationView(a *store.Attestation) apitypes.Attestation {
	return apitypes.Attestation{ID: a.ID, RunID: a.RunID, JobID: a.JobID, SubjectName: a.SubjectName, SubjectDigest: a.SubjectDigest,
		Kid: a.Kid, Bundle: a.Bundle, CreatedAt: a.CreatedAt}
}

// signingKeyView is k without its sealed private half.
func signingKeyView(k *store.SigningKey) apitypes.SigningKey {
	return apitypes.SigningKey{Kid: k.Kid, PublicJWK: k.PublicJWK, Alg: k.Alg, SignerKind: k.SignerKind, Status: k.Status,
		RevocationReason: k.RevocationReason, CreatedAt: k.CreatedAt, ActivatedAt: k.ActivatedAt, RetiredAt: k.RetiredAt, RevokedAt: k.RevokedAt}
}
