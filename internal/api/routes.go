package api

import (
	"net/http"
	"strings"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/provenance"
)

// route is one row of the declarative route table: NewRouter mounts it, the
// OpenAPI document (openapi.go) describes it and Routes lists it, so the
// three never disagree.
type route struct {
	method string
	// path is the full ServeMux path ("/api/v1/admin/runs/{runId}").
	path string
	// perm is the RBAC permission the caller's token needs; "" = public
	// (no authentication).
	perm auth.Permission
	// summary is the operation's one-line description (OpenAPI summary).
	summary string
	// handle serves the route; nil for an alias (servedBy).
	handle func(*server, http.ResponseWriter, *http.Request)
	// bodyless routes refuse a request body (nobody.go).
	bodyless bool
	// servedBy names the "METHOD path" pattern whose handler also serves
	// this route: two KiCI paths overlap in a ServeMux, so only one is
	// mounted (DELETE /secrets/scopes/{orgId}/{scope}).
	servedBy string
	// noMethodFallback skips the path's 405 handler, because a wider
	// pattern must keep serving the other methods of this path
	// (POST /contexts/templates against GET /contexts/{name}).
	noMethodFallback bool
	// request and response are zero values of the JSON bodies, reflected
	// into the OpenAPI schemas; nil = not described. A response of type
	// oneOf lists the shapes a route answers with depending on its query.
	request, response any
	// queryParams are the query parameters the handler reads (all
	// optional in OpenAPI terms; the handler answers 400 when a required one
	// is missing).
	queryParams []string
}

// key is the route's "METHOD path" pattern, as the authorizer, the audit
// recorder and the access log name it.
func (rt route) key() string { return rt.method + " " + rt.path }

func adm(method, path string, perm auth.Permission, summary string, h func(*server, http.ResponseWriter, *http.Request)) route {
	return route{method: method, path: apitypes.AdminPrefix + path, perm: perm, summary: summary, handle: h}
}

func public(method, path, summary string, h func(*server, http.ResponseWriter, *http.Request)) route {
	return route{method: method, path: path, summary: summary, handle: h}
}

// noBody marks a route whose request must have no body.
func (rt route) noBody() route { rt.bodyless = true; return rt }

// query records the query parameters the handler reads.
func (rt route) query(names ...string) route { rt.queryParams = names; return rt }

// bodies records the request and response shapes for the OpenAPI document.
func (rt route) bodies(req, resp any) route { rt.request, rt.response = req, resp; return rt }

// returns records the response shape alone (the request body, if any, is
// not described).
func (rt route) returns(resp any) route { rt.response = resp; return rt }

// routeTable returns every route NewRouter mounts, in documentation order.
// (A function, not a variable: the table names the handler that serves the
// document generated from it.)
func routeTable() []route {
	return []route{
		public("GET", "/health", "Liveness probe: {status, version}", (*server).health).returns(apitypes.Health{}),
		public("GET", "/ready", "Readiness probe: 200 ready, 503 not ready", (*server).ready).returns(apitypes.Readiness{}),
		public("GET", apitypes.AdminPrefix+"/openapi.json", "This API's OpenAPI 3.1 description", (*server).openAPI),

		adm("POST", "/generic-sources", auth.PermSourceCreate, "Create a generic or local event source", (*server).createSource).bodies(apitypes.CreateSourceRequest{}, apitypes.SourceEnvelope{}),
		adm("GET", "/generic-sources", auth.PermSourceRead, "List event sources", (*server).listSources).query("orgId").returns(apitypes.SourceList{}),
		adm("GET", "/generic-sources/{id}", auth.PermSourceRead, "Show one event source", (*server).getSource).returns(apitypes.SourceEnvelope{}),
		adm("DELETE", "/generic-sources/{id}", auth.PermSourceDelete, "Delete an event source", (*server).deleteSource).noBody().returns(apitypes.Deleted{}),
		adm("POST", "/generic-sources/{id}/enable", auth.PermSourceUpdate, "Enable an event source", (*server).enableSource).noBody().returns(apitypes.SourceEnabled{}),
		adm("POST", "/generic-sources/{id}/disable", auth.PermSourceUpdate, "Disable an event source", (*server).disableSource).noBody().returns(apitypes.SourceEnabled{}),
		adm("PUT", "/generic-sources/{id}/org-wide-workflows", auth.PermSourceUpdate, "Allow or deny organization-wide workflows for a source", (*server).putSourceOrgWide).bodies(apitypes.SourceOrgWideWorkflows{}, apitypes.SourceOrgWideWorkflows{}),
		adm("GET", "/generic-sources/{id}/webhook-secret", auth.PermSourceSecretRead, "Read a source's routing key and webhook secret", (*server).getSourceSecret).returns(apitypes.SourceWebhookSecret{}),
		adm("POST", "/sources", auth.PermSourceCreate, "Create a GitHub App source", (*server).createGitHubSource).bodies(apitypes.CreateGitHubSourceRequest{}, apitypes.GitHubSourceCreated{}),
		adm("GET", "/generic-sources/{id}/webhook-secrets", auth.PermSourceSecretRead, "List a source's webhook secrets", (*server).listSecrets).returns(apitypes.SecretList{}),
		adm("POST", "/generic-sources/{id}/webhook-secrets", auth.PermSourceUpdate, "Rotate in a new webhook secret", (*server).rotateSecret).noBody().returns(apitypes.RotatedSecret{}),
		adm("DELETE", "/generic-sources/{id}/webhook-secrets/{secretId}", auth.PermSourceUpdate, "Revoke one webhook secret", (*server).revokeSecret).noBody().returns(apitypes.RevokedSecret{}),
		adm("GET", "/rejected-deliveries", auth.PermEventLogRead, "List rejected webhook deliveries", (*server).listRejected).query("sourceId", "limit").returns(apitypes.RejectedDeliveryList{}),
		adm("GET", "/event-log", auth.PermEventLogRead, "List the event log", (*server).listEventLog).query("orgId", "routingKey", "event", "action", "status", "deliveryId", "limit", "offset", "from", "to").returns(apitypes.EventLogPage{}),
		adm("GET", "/event-log/{deliveryId}", auth.PermEventLogRead, "Show one event-log entry", (*server).getEventLog).returns(apitypes.EventLogDetail{}).query("orgId", "includePayload"),
		adm("POST", "/events/emit", auth.PermContextCreate, "Emit a kici_event", (*server).emitEvent).bodies(apitypes.EmitRequest{}, apitypes.EmitResponse{}),
		adm("GET", "/registrations", auth.PermContextRead, "List the registration index", (*server).listRegistrations).query("customerId", "org", "routingKey", "repoIdentifier", "triggerType").returns(apitypes.RegistrationList{}),
		adm("GET", "/registrations/{id}", auth.PermContextRead, "Show one registration", (*server).getRegistration).returns(apitypes.RegistrationEnvelope{}),

		adm("GET", "/runs", auth.PermRunRead, "List runs", (*server).listRuns).query("status", "workflowName", "repo", "branch", "deliveryId", "since", "count", "limit", "offset").returns(oneOf{apitypes.RunList{}, apitypes.RunCount{}}),
		adm("POST", "/runs", auth.PermSourceTrigger, "Start a manual run", (*server).startManualRun).bodies(apitypes.ManualRunRequest{}, apitypes.RunEnvelope{}),
		adm("GET", "/runs/{runId}", auth.PermRunRead, "Show one run", (*server).getRun).returns(apitypes.RunEnvelope{}),
		adm("GET", "/runs/{runId}/jobs", auth.PermRunRead, "List a run's jobs", (*server).listJobs).query("includeSteps").returns(apitypes.JobList{}),
		adm("GET", "/runs/{runId}/jobs/{jobId}/steps/{i}/logs", auth.PermRunRead, "Read a page of a step's log", (*server).stepLogs).returns(apitypes.LogsPage{}).query("cursor", "limit"),
		adm("GET", "/runs/{runId}/events", auth.PermRunRead, "Stream a run's status events (server-sent events)", (*server).runEvents),
		adm("GET", "/runs/{runId}/jobs/{jobId}/steps/{i}/logs/stream", auth.PermRunRead, "Stream a step's log (server-sent events)", (*server).stepLogStream),
		adm("POST", "/runs/{runId}/cancel", auth.PermRunCancel, "Cancel a run", (*server).cancelRun).bodies(apitypes.CancelRequest{}, apitypes.CancelResponse{}),
		adm("POST", "/runs/{runId}/rerun", auth.PermRunRerun, "Rerun a run", (*server).rerunRun).noBody().returns(apitypes.RerunResponse{}).query("failed"),
		adm("GET", "/orchestrator/drain", auth.PermSettingsRead, "Show the drain state", (*server).getDrain).returns(apitypes.ClusterDrainStatus{}),
		adm("POST", "/orchestrator/drain", auth.PermOrchestratorDrain, "Start or stop draining", (*server).postDrain).bodies(apitypes.DrainRequest{}, apitypes.ClusterDrainStatus{}),
		adm("GET", "/cluster/nodes", auth.PermSettingsRead, "List the cluster's nodes", (*server).getClusterNodes).returns(apitypes.ClusterNodeList{}),
		adm("DELETE", "/cluster/nodes/{id}", auth.PermOrchestratorDrain, "Remove a stopped node from the registry", (*server).removeClusterNode).noBody().query("force").returns(apitypes.ClusterNodeRemoved{}),
		adm("GET", "/cluster-settings", auth.PermSettingsRead, "Show the live cluster settings", (*server).getClusterSettings).returns(apitypes.ClusterSettingsView{}),
		adm("PATCH", "/cluster-settings", auth.PermSecretWrite, "Change live cluster settings", (*server).patchClusterSettings).returns(apitypes.ClusterSettingsView{}),
		adm("GET", "/scalers", auth.PermAgentRead, "Show the scalers' state", (*server).listScalers).returns(apitypes.ScalersView{}),

		public("GET", "/.well-known/openid-configuration", "OIDC discovery document of the provenance issuer", (*server).openidConfiguration).returns(provenance.OpenIDConfiguration{}),
		public("GET", "/.well-known/jwks.json", "Public keys that verify provenance signatures", (*server).jwks).returns(provenance.JWKS{}),
		public("POST", "/v1/verify-attestation", "Verify an attestation bundle", (*server).verifyAttestation).returns(provenance.Verdict{}),
		adm("GET", "/runs/{runId}/attestations", auth.PermRunRead, "List a run's attestations", (*server).listAttestations).returns(apitypes.AttestationList{}),
		adm("GET", "/runs/{runId}/artifacts", auth.PermRunRead, "List a run's artifacts", (*server).listArtifacts).returns(apitypes.ArtifactList{}),
		adm("GET", "/runs/{runId}/artifacts/{name}", auth.PermRunRead, "Download one artifact", (*server).downloadArtifact),
		adm("GET", "/attestations/{id}", auth.PermRunRead, "Show one attestation with its bundle", (*server).getAttestation).returns(apitypes.Attestation{}),
		adm("GET", "/signing-keys", auth.PermSettingsRead, "List provenance signing keys", (*server).listSigningKeys).returns(apitypes.SigningKeyList{}),
		adm("POST", "/signing-keys/rotate", auth.PermKeyRotate, "Rotate the provenance signing key", (*server).rotateSigningKey).noBody().returns(apitypes.SigningKey{}),
		adm("POST", "/signing-keys/{kid}/revoke", auth.PermKeyRotate, "Revoke a provenance signing key", (*server).revokeSigningKey).returns(apitypes.SigningKey{}),

		adm("POST", "/tokens", auth.PermTokenManage, "Create an admin token", (*server).createAdminToken).returns(apitypes.AdminTokenCreated{}),
		adm("GET", "/tokens", auth.PermTokenManage, "List admin tokens", (*server).listAdminTokens).returns(apitypes.AdminTokenList{}),
		adm("DELETE", "/tokens/{id}", auth.PermTokenManage, "Revoke an admin token", (*server).revokeAdminToken).noBody().returns(apitypes.Revoked{}),
		adm("GET", "/web-sessions", auth.PermTokenManage, "List web UI sessions", (*server).listWebSessions).query("subject").returns(apitypes.WebSessionList{}),
		adm("DELETE", "/web-sessions", auth.PermTokenManage, "End every web UI session of a person", (*server).revokeWebSessionsOf).noBody().query("subject").returns(apitypes.WebSessionsRevoked{}),
		adm("DELETE", "/web-sessions/{id}", auth.PermTokenManage, "End one web UI session", (*server).revokeWebSession).noBody().returns(apitypes.Revoked{}),
		{method: "POST", path: apitypes.AgentTokenPath, perm: auth.PermAgentTokenManage, summary: "Create an agent token", handle: (*server).createAgentToken, response: apitypes.AgentTokenCreated{}},
		{method: "GET", path: apitypes.AgentTokenPath, perm: auth.PermAgentTokenManage, summary: "List agent tokens", handle: (*server).listAgentTokens, response: apitypes.AgentTokenList{}, queryParams: []string{"type"}},
		{method: "DELETE", path: apitypes.AgentTokenPath + "/{id}", perm: auth.PermAgentTokenManage, summary: "Revoke an agent token", handle: (*server).revokeAgentToken, bodyless: true, response: apitypes.AgentTokenRevoked{}},
		adm("GET", "/secrets/scopes", auth.PermSecretList, "List an org's secret scopes", (*server).listSecretScopes).query("orgId").returns(apitypes.SecretScopeList{}),
		adm("POST", "/secrets/scopes", auth.PermSecretWrite, "Create a secret scope", (*server).createSecretScope).returns(apitypes.Created{}),
		adm("GET", "/secrets/keys", auth.PermSecretList, "List the key names of a secret scope", (*server).listSecretKeys).query("orgId", "scope").returns(apitypes.SecretKeyList{}),
		{method: "DELETE", path: apitypes.AdminPrefix + "/secrets/scopes/{orgId}/{scope}", perm: auth.PermSecretDelete, summary: "Delete a secret scope with its secrets",
			servedBy: "DELETE " + apitypes.AdminPrefix + "/secrets/{orgId}/{scope}/{key}", response: apitypes.Deleted{}},
		adm("PUT", "/secrets/{orgId}/{scope}/{key}", auth.PermSecretWrite, "Set a secret (the value is never returned)", (*server).putSecret).returns(apitypes.Set{}),
		adm("DELETE", "/secrets/{orgId}/{scope}/{key}", auth.PermSecretDelete, "Delete a secret", (*server).deleteSecret).noBody().returns(apitypes.Deleted{}),
		adm("POST", "/rotate-key", auth.PermKeyRotate, "Re-encrypt every secret under a new data key", (*server).rotateKey).noBody().returns(apitypes.KeyRotation{}),
		adm("GET", "/access-log", auth.PermAccessLogRead, "Read the access log", (*server).listAccessLog).query("action", "tokenId", "routingKey", "since", "limit", "offset").returns(apitypes.AccessLogList{}),

		adm("POST", "/contexts", auth.PermSecretWrite, "Create a context", (*server).createContext).returns(apitypes.ContextCreated{}),
		adm("GET", "/contexts", auth.PermContextRead, "List an org's contexts", (*server).listContexts).returns(apitypes.ContextList{}).query("orgId", "includeSecrets"),
		{method: "POST", path: apitypes.AdminPrefix + "/contexts/templates", perm: auth.PermSecretWrite, summary: "Create a context from a template",
			handle: (*server).createContextTemplate, noMethodFallback: true, response: apitypes.ContextTemplateCreated{}},
		adm("GET", "/contexts/{name}", auth.PermContextRead, "Show a context with its variables and bindings", (*server).getContext).returns(apitypes.ContextDetail{}).query("orgId"),
		adm("DELETE", "/contexts/{name}", auth.PermSecretWrite, "Delete a context", (*server).deleteContext).noBody().query("orgId").returns(apitypes.Deleted{}),
		adm("POST", "/contexts/{name}/bind", auth.PermSecretWrite, "Bind a context to secret scopes", (*server).bindContext).returns(apitypes.Created{}),
		adm("PATCH", "/contexts/{name}/policy", auth.PermSecretWrite, "Change a context's policy", (*server).patchContextPolicy).returns(apitypes.Updated{}),
		adm("GET", "/contexts/{name}/variables", auth.PermContextRead, "List a context's variables", (*server).listContextVariables).returns(apitypes.ContextVariableList{}).query("orgId"),
		adm("PUT", "/contexts/{name}/variables/{key}", auth.PermSecretWrite, "Set a context variable", (*server).putContextVariable).query("orgId").returns(apitypes.Set{}),
		adm("DELETE", "/contexts/{name}/variables/{key}", auth.PermSecretDelete, "Delete a context variable", (*server).deleteContextVariable).noBody().query("orgId").returns(apitypes.Deleted{}),
		adm("GET", "/contexts/{name}/source-overrides", auth.PermContextRead, "List a context's per-source overrides", (*server).listContextSourceOverrides).returns(apitypes.ContextSourceOverrideList{}).query("routingKey", "orgId"),
		adm("PUT", "/contexts/{name}/source-overrides/{key}", auth.PermSecretWrite, "Set a per-source override", (*server).putContextSourceOverride).query("routingKey", "orgId").returns(apitypes.Set{}),
		adm("DELETE", "/contexts/{name}/source-overrides/{key}", auth.PermSecretDelete, "Delete a per-source override", (*server).deleteContextSourceOverride).noBody().query("routingKey", "orgId").returns(apitypes.Deleted{}),

		adm("GET", "/held-runs", auth.PermCITrustRead, "List held runs", (*server).listHeldRuns).query("runId", "status", "customerId").returns(apitypes.HeldRunList{}),
		adm("GET", "/check-runs", auth.PermRunRead, "List forge check runs", (*server).listCheckRuns).query("sha", "runId").returns(apitypes.CheckRunList{}),
		adm("POST", "/notifications", auth.PermSourceUpdate, "Create a notification subscription", (*server).createNotification).bodies(apitypes.NotificationCreate{}, apitypes.NotificationCreated{}),
		adm("GET", "/notifications", auth.PermSourceRead, "List notification subscriptions", (*server).listNotifications).query("orgId").returns(apitypes.NotificationList{}),
		adm("DELETE", "/notifications/{id}", auth.PermSourceUpdate, "Delete a notification subscription", (*server).deleteNotification).noBody().returns(apitypes.Deleted{}),
		adm("POST", "/notifications/{id}/test", auth.PermSourceUpdate, "Send a test notification", (*server).testNotification).noBody().returns(apitypes.NotificationTestQueued{}),
		adm("GET", "/notification-deliveries", auth.PermRunRead, "List notification deliveries", (*server).listNotificationDeliveries).query("subscriptionId", "runId", "status").returns(apitypes.NotificationDeliveryList{}),
		adm("POST", "/held-runs/decision", auth.PermCITrustAdmin, "Approve or reject a held run", (*server).decideHeldRun).returns(apitypes.HeldRunDecision{}),
		adm("GET", "/trust-policy", auth.PermCITrustRead, "Show an org's trust policy", (*server).getTrustPolicy).query("customerId").returns(apitypes.TrustPolicyEnvelope{}),
		adm("PATCH", "/trust-policy", auth.PermCITrustAdmin, "Change an org's trust policy", (*server).patchTrustPolicy).returns(apitypes.TrustPolicyEnvelope{}),
		adm("GET", "/trust-policy/directory", auth.PermCITrustRead, "Show the trust directory", (*server).getTrustDirectory).returns(apitypes.DirectoryEnvelope{}).query("customerId"),
		adm("PATCH", "/trust-policy/directory", auth.PermCITrustAdmin, "Set a user's trust", (*server).patchTrustDirectory).returns(apitypes.DirectoryEnvelope{}),
		adm("DELETE", "/trust-policy/directory", auth.PermCITrustAdmin, "Remove a user from the trust directory", (*server).deleteTrustDirectory).noBody().query("userId", "customerId").returns(apitypes.DirectoryRemoval{}),
	}
}

// Routes lists every route of the table as "METHOD path permission" ("-" =
// no authentication), for documentation and tests.
var Routes = routeStrings()

func routeStrings() []string {
	out := make([]string, 0, len(routeTable()))
	for _, rt := range routeTable() {
		perm := rt.perm
		if perm == "" {
			perm = "-"
		}
		out = append(out, rt.key()+" "+string(perm))
	}
	return out
}

// mount registers every route of the table on mux: per path, each method's
// handler (behind the authorizer unless public) and a method-less pattern
// answering 405. It returns the "METHOD path" patterns it mounted.
func (s *server) mount(mux *http.ServeMux) []string {
	type pathRoutes struct {
		hs         map[string]http.Handler
		noFallback bool
	}
	var order []string
	byPath := map[string]*pathRoutes{}
	for _, rt := range routeTable() {
		if rt.servedBy != "" {
			continue
		}
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rt.handle(s, w, r) })
		if rt.bodyless {
			h = bodyless(h)
		}
		var handler http.Handler = h
		if rt.perm != "" {
			handler = s.gateScoped(rt.key(), rt.perm, h)
		}
		p := byPath[rt.path]
		if p == nil {
			p = &pathRoutes{hs: map[string]http.Handler{}}
			byPath[rt.path] = p
			order = append(order, rt.path)
		}
		p.hs[rt.method] = handler
		p.noFallback = p.noFallback || rt.noMethodFallback
	}
	var mounted []string
	for _, path := range order {
		p := byPath[path]
		if p.noFallback {
			for m, h := range p.hs {
				mux.Handle(m+" "+path, s.wrap(h))
				mounted = append(mounted, m+" "+path)
			}
			continue
		}
		for m := range p.hs {
			mounted = append(mounted, m+" "+path)
		}
		s.handlePath(mux, path, p.hs)
	}
	return mounted
}

// pathParams returns the {name} wildcards of a ServeMux path, in order.
func pathParams(path string) []string {
	var out []string
	for _, seg := range strings.Split(path, "/") {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(seg, "{"), "}"))
		}
	}
	return out
}
