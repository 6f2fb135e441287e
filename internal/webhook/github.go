package webhook

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
)

// GitHub request headers.
const (
	HeaderGitHubEvent      = "X-GitHub-Event"
	HeaderGitHubDelivery   = "X-GitHub-Delivery"
	HeaderHookTargetType   = "X-GitHub-Hook-Installation-Target-Type"
	HeaderHookTargetID     = "X-GitHub-Hook-Installation-Target-ID"
	HeaderHubSignatureSHA1 = "X-Hub-Signature"
)

// GitHubRoutingKeyPrefix prefixes a GitHub App source's routing key
// ("github:<appId>").
const GitHubRoutingKeyPrefix = "github:"

// GitHub returns the handler of POST /webhook/{orgId}/github/{sourceId}
// (KiCI's direct GitHub route; see docs/kici-compatibility.md#ingress).
// In order: the source is looked up by id (404 "source not found" when
// unknown, not github or in another org; 404 MsgSourceDisabled, with a
// rejected-delivery record, when disabled); the body is capped (413); App target
// headers, when present, must read "integration" and the source's App id
// (400); X-GitHub-Delivery and X-GitHub-Event are required (400); the
// X-Hub-Signature-256 HMAC is checked against every active secret of the
// source (401; 422 when the source has no secret); the per-source rate
// limit applies (429 with Retry-After); the body must be a JSON object
// (400). The delivery id is "<routingKey>:<X-GitHub-Delivery>"; a replay
// answers 200 {accepted, duplicate:true}, a new delivery 202 {accepted,
// deliveryId} once persisted.
func (in *Ingress) GitHub() http.Handler {
	return http.HandlerFunc(in.serveGitHub)
}

func (in *Ingress) serveGitHub(w http.ResponseWriter, r *http.Request) {
	if !postOnly(w, r) {
		return
	}
	org, id := r.PathValue("orgId"), r.PathValue("sourceId")
	ctx := r.Context()
	is, err := in.st.GetIngressSource(ctx, id)
	if err == nil && (is.Source.Provider != provider.GitHub || is.Source.OrgID != org) {
		err = store.ErrNotFound // the route serves only its org's GitHub sources
	}
	q := in.admit(w, r, githubRoute, is, err, "sourceId", id)
	if q == nil {
		return
	}
	src := q.src

	limit := in.opts.MaxGitHubPayloadBytes
	if in.opts.GitHubPayloadCap != nil {
		if n := in.opts.GitHubPayloadCap(ctx); n > 0 {
			limit = n
		}
	}
	if !q.readBody(limit) {
		return
	}
	body := q.body

	tType, tID := r.Header.Get(HeaderHookTargetType), r.Header.Get(HeaderHookTargetID)
	if tType != "" || tID != "" {
		appID, isApp := strings.CutPrefix(src.RoutingKey, GitHubRoutingKeyPrefix)
		n, perr := strconv.ParseInt(tID, 10, 64)
		if tType != "integration" || perr != nil || !isApp || strconv.FormatInt(n, 10) != appID {
			q.reject(http.StatusBadRequest, "installation target headers do not match this source's GitHub App")
			return
		}
	}
	if q.rawID == "" || q.event == "" {
		q.reject(http.StatusBadRequest, "missing "+HeaderGitHubDelivery+" or "+HeaderGitHubEvent+" header")
		return
	}
	if len(q.rawID) > MaxRawDeliveryIDLen || !printable(q.rawID) || len(q.event) > 100 || !printable(q.event) {
		q.reject(http.StatusBadRequest, "invalid "+HeaderGitHubDelivery+" or "+HeaderGitHubEvent+" header")
		return
	}

	secrets, err := q.activeSecrets()
	if err != nil {
		q.internalError("secrets lookup", err)
		return
	}
	if len(secrets) == 0 {
		q.reject(http.StatusUnprocessableEntity, "source has no active webhook secret (misconfigured)")
		return
	}
	if !VerifyHMAC(r.Header.Get(HeaderHubSignature), body, secrets) {
		q.reject(http.StatusUnauthorized, "invalid signature")
		return
	}

	if !q.withinRateLimit(q.set.RateLimitRPM) {
		return
	}
	if !isJSONObject(body) {
		q.reject(http.StatusBadRequest, "body is not a JSON object")
		return
	}
	head := readHead(body)
	q.accept(head.Action, head.Repository.FullName, head.Ref)
}

// isJSONObject reports whether body is one valid JSON object.
func isJSONObject(body []byte) bool {
	if !json.Valid(body) {
		return false
	}
	for _, c := range body {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return true
		default:
			return false
		}
	}
	return false
}
