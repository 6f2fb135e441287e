package webhook

import (
	"encoding/json"
	"errors"
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
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		fail(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	org, id := r.PathValue("orgId"), r.PathValue("sourceId")
	ctx := r.Context()
	src, err := in.st.GetSource(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (src.Provider != provider.GitHub || src.OrgID != org)) {
		fail(w, http.StatusNotFound, "source not found")
		return
	}
	if err != nil {
		in.log.Error("webhook: source lookup failed", "sourceId", id, "error", err)
		fail(w, http.StatusInternalServerError, "internal error")
		return
	}
	if !src.Enabled {
		in.refuseDisabled(w, r, src, "github", r.Header.Get(HeaderGitHubDelivery), r.Header.Get(HeaderGitHubEvent))
		return
	}
	delivery := strings.TrimSpace(r.Header.Get(HeaderGitHubDelivery))
	event := strings.TrimSpace(r.Header.Get(HeaderGitHubEvent))
	rej := func(status int, msg string, body []byte, size int64) {
		in.reject(w, r, src, "github", delivery, event, status, msg, body, size)
	}

	limit := in.opts.MaxGitHubPayloadBytes
	if in.opts.GitHubPayloadCap != nil {
		if n := in.opts.GitHubPayloadCap(ctx); n > 0 {
			limit = n
		}
	}
	body, tooBig, err := readCapped(w, r, limit)
	if tooBig {
		rej(http.StatusRequestEntityTooLarge, "payload too large (limit "+strconv.FormatInt(limit, 10)+" bytes)", nil, max(r.ContentLength, 0))
		return
	}
	if err != nil {
		fail(w, http.StatusBadRequest, "could not read body")
		return
	}
	size := int64(len(body))

	tType, tID := r.Header.Get(HeaderHookTargetType), r.Header.Get(HeaderHookTargetID)
	if tType != "" || tID != "" {
		appID, isApp := strings.CutPrefix(src.RoutingKey, GitHubRoutingKeyPrefix)
		n, perr := strconv.ParseInt(tID, 10, 64)
		if tType != "integration" || perr != nil || !isApp || strconv.FormatInt(n, 10) != appID {
			rej(http.StatusBadRequest, "installation target headers do not match this source's GitHub App", body, size)
			return
		}
	}
	if delivery == "" || event == "" {
		rej(http.StatusBadRequest, "missing "+HeaderGitHubDelivery+" or "+HeaderGitHubEvent+" header", body, size)
		return
	}
	if len(delivery) > MaxRawDeliveryIDLen || !printable(delivery) || len(event) > 100 || !printable(event) {
		rej(http.StatusBadRequest, "invalid "+HeaderGitHubDelivery+" or "+HeaderGitHubEvent+" header", body, size)
		return
	}

	secrets, err := in.activeSecrets(ctx, src)
	if err != nil {
		in.log.Error("webhook: secrets lookup failed", "sourceId", src.ID, "error", err)
		fail(w, http.StatusInternalServerError, "internal error")
		return
	}
	if len(secrets) == 0 {
		rej(http.StatusUnprocessableEntity, "source has no active webhook secret (misconfigured)", body, size)
		return
	}
	if !VerifyHMAC(r.Header.Get(HeaderHubSignature), body, secrets) {
		rej(http.StatusUnauthorized, "invalid signature", body, size)
		return
	}

	set, err := in.settings(ctx, src)
	if err != nil {
		in.log.Error("webhook: settings lookup failed", "sourceId", src.ID, "error", err)
		fail(w, http.StatusInternalServerError, "internal error")
		return
	}
	if ok, wait := in.limiter.Allow(src.ID, set.RateLimitRPM); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())))
		rej(http.StatusTooManyRequests, "rate limit exceeded", body, size)
		return
	}

	var head struct {
		Action     string `json:"action"`
		Ref        string `json:"ref"`
		Repository struct {
			FullName string `json:"full_name"`
		} `json:"repository"`
	}
	if !isJSONObject(body) {
		rej(http.StatusBadRequest, "body is not a JSON object", body, size)
		return
	}
	if json.Unmarshal(body, &head) != nil {
		// A field of an unexpected type: the event log keeps none of them.
		head.Action, head.Ref, head.Repository.FullName = "", "", ""
	}
	d := &store.Delivery{ID: src.RoutingKey + ":" + delivery, SourceID: src.ID, OrgID: src.OrgID, Event: event,
		Payload: json.RawMessage(body), ReceivedAt: in.opts.Now()}
	in.accept(w, r, d, in.logEntry(src, event, truncate(head.Action, 100), truncate(head.Repository.FullName, 200), truncate(head.Ref, 300), body))
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
