package api

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/ghapi"
	"kici.dev/kici/internal/netguard"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/provider/universal"
	"kici.dev/kici/internal/store"
)

// ModeObserved is the orchestrator mode that refuses GitHub-App sources.
const ModeObserved = config.ModeObserved

// ObservedRefusal is the 400 message of a GitHub-App source creation on an
// observed orchestrator (KiCI admin-sources: those sources are ingested
// through the Platform relay, which an observed orchestrator never accepts).
const ObservedRefusal = "GitHub App sources cannot be created in observed mode: they are ingested through the Platform relay, which an observed orchestrator refuses (use a token source, or run in independent or hybrid mode)"

func (s *server) createGitHubSource(w http.ResponseWriter, r *http.Request) {
	var req apitypes.CreateGitHubSourceRequest
	if !decodeBody(w, r, &req) {
		return
	}
	cr := apitypes.CreateSourceRequest{OrgID: req.OrgID, Name: req.Name}
	if msg := s.validateSource(r.Context(), &cr); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	switch {
	case req.Provider != provider.GitHub:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("provider %q is not supported (supported: github; generic and local sources use /generic-sources)", req.Provider))
		return
	case (req.AppID != 0 || req.PrivateKey != "") && req.Token != "":
		writeError(w, http.StatusBadRequest, "give either appId and privateKey (a GitHub App) or token, not both")
		return
	case req.Token == "" && (req.AppID <= 0 || req.PrivateKey == ""):
		writeError(w, http.StatusBadRequest, "appId and privateKey are required for a GitHub App source (or give token)")
		return
	case req.AppID > 0 && s.d.Mode == ModeObserved:
		writeError(w, http.StatusBadRequest, ObservedRefusal)
		return
	case req.RateLimitRPM < -1 || req.RateLimitRPM > 1000000:
		writeError(w, http.StatusBadRequest, "rateLimitRpm must be -1 (unlimited), 0 (the default 600) or at most 1000000")
		return
	case len(req.WebhookSecret) > 0 && len(req.WebhookSecret) < 16:
		writeError(w, http.StatusBadRequest, "webhookSecret must be at least 16 characters")
		return
	}
	if req.APIBaseURL != "" {
		u, err := url.Parse(req.APIBaseURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("apiBaseUrl %q must be an http(s) URL without credentials", req.APIBaseURL))
			return
		}
		if err := s.sourceURLs().CheckURL(r.Context(), "apiBaseUrl", req.APIBaseURL); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	id := uuid.NewString()
	routingKey := "github:token:" + id
	if req.AppID > 0 {
		client, err := ghapi.NewAppClient(req.APIBaseURL, req.AppID, req.PrivateKey, s.d.GitHubHTTP)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		info, err := client.App(ctx)
		cancel()
		if err != nil {
			writeError(w, http.StatusBadRequest, "GitHub App credentials could not be validated: "+err.Error())
			return
		}
		if info.ID != 0 && info.ID != req.AppID {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("the private key belongs to GitHub App %d, not %d", info.ID, req.AppID))
			return
		}
		routingKey = "github:" + strconv.FormatInt(req.AppID, 10)
	}
	secret := req.WebhookSecret
	if secret == "" {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			s.internalError(w, r, err)
			return
		}
		secret = hex.EncodeToString(b)
	}
	src := &store.Source{ID: id, OrgID: req.OrgID, Name: req.Name, Provider: provider.GitHub, RoutingKey: routingKey,
		VerificationMethod: VerificationHMAC, Enabled: true, CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
	set := &store.SourceSettings{RateLimitRPM: req.RateLimitRPM, GitHub: &store.GitHubConfig{APIBaseURL: req.APIBaseURL,
		AppID: req.AppID, PrivateKeyPEM: req.PrivateKey, Token: req.Token}}
	err := s.d.Store.CreateSourceWithSettings(r.Context(), src, set, []*store.SourceSecret{{Secret: secret}})
	if errors.Is(err, store.ErrConflict) {
		writeError(w, http.StatusConflict, fmt.Sprintf("A source named %q already exists in org %q", req.Name, req.OrgID))
		return
	} else if err != nil {
		s.internalError(w, r, err)
		return
	}
	v := NewSourceView(src)
	writeJSON(w, http.StatusCreated, apitypes.GitHubSourceCreated{ID: src.ID, Name: src.Name, RoutingKey: routingKey,
		WebhookURL: v.WebhookPath, Source: v})
}

// ---------------------------------------------------------------- webhook secrets

// ensureSecretRows moves a source's original secret into the rotation
// table, so that it can be listed and revoked like any other.
func (s *server) ensureSecretRows(ctx context.Context, src *store.Source) ([]*store.SourceSecret, error) {
	all, err := s.d.Store.ListSourceSecrets(ctx, src.ID, false)
	if err != nil || len(all) > 0 || src.WebhookSecret == "" {
		return all, err
	}
	first := &store.SourceSecret{SourceID: src.ID, Secret: src.WebhookSecret, CreatedAt: src.CreatedAt}
	if err := s.d.Store.AddSourceSecret(ctx, first); err != nil {
		return nil, err
	}
	return []*store.SourceSecret{first}, nil
}

func (s *server) listSecrets(w http.ResponseWriter, r *http.Request) {
	src := s.loadSource(w, r)
	if src == nil {
		return
	}
	all, err := s.ensureSecretRows(r.Context(), src)
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	out := []apitypes.SecretView{}
	for _, x := range all {
		out = append(out, apitypes.SecretView{ID: x.ID, CreatedAt: x.CreatedAt, RevokedAt: x.RevokedAt})
	}
	writeJSON(w, http.StatusOK, apitypes.SecretList{Secrets: out})
}

// rotateSecret adds a new active secret (the old ones stay active until
// revoked, so deliveries signed with either pass during the switch).
func (s *server) rotateSecret(w http.ResponseWriter, r *http.Request) {
	src := s.loadSource(w, r)
	if src == nil {
		return
	}
	if src.VerificationMethod != VerificationHMAC && src.VerificationMethod != VerificationBearer {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("source %s verifies with %q, which uses no secret", src.ID, src.VerificationMethod))
		return
	}
	if _, err := s.ensureSecretRows(r.Context(), src); err != nil {
		s.internalError(w, r, err)
		return
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		s.internalError(w, r, err)
		return
	}
	sec := &store.SourceSecret{SourceID: src.ID, Secret: hex.EncodeToString(b)}
	if err := s.d.Store.AddSourceSecret(r.Context(), sec); err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, apitypes.RotatedSecret{ID: sec.ID, WebhookSecret: sec.Secret, CreatedAt: sec.CreatedAt})
}

func (s *server) revokeSecret(w http.ResponseWriter, r *http.Request) {
	src := s.loadSource(w, r)
	if src == nil {
		return
	}
	if _, err := s.ensureSecretRows(r.Context(), src); err != nil {
		s.internalError(w, r, err)
		return
	}
	err := s.d.Store.RevokeSourceSecret(r.Context(), src.ID, r.PathValue("secretId"), time.Now().UTC())
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "Active secret not found")
		return
	} else if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.RevokedSecret{Revoked: true, ID: r.PathValue("secretId")})
}

func (s *server) listRejected(w http.ResponseWriter, r *http.Request) {
	limit, ok := intParam(w, r, "limit", 50, 1, 500)
	if !ok {
		return
	}
	recs, err := s.d.Store.ListRejected(r.Context(), r.URL.Query().Get("sourceId"), limit)
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.RejectedDeliveryList{Rejected: derefAll(recs)})
}

// ---------------------------------------------------------------- event log

func viewOf(e *store.EventLogEntry) apitypes.EventLogView {
	v := apitypes.EventLogView{EventLogEntry: eventLogEntryView(e), PayloadOmitted: e.PayloadOmittedReason != ""}
	if len(e.RunIDs) > 0 {
		v.RunID = e.RunIDs[0]
	}
	return v
}

func intParam(w http.ResponseWriter, r *http.Request, name string, def, lo, hi int) (int, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%s must be an integer between %d and %d", name, lo, hi))
		return 0, false
	}
	return n, true
}

func timeParam(w http.ResponseWriter, r *http.Request, name string) (*time.Time, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return nil, true
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%s must be an RFC 3339 time (e.g. 2026-01-02T15:04:05Z)", name))
		return nil, false
	}
	return &t, true
}

func (s *server) listEventLog(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.EventLogFilter{OrgID: q.Get("orgId"), RoutingKey: q.Get("routingKey"), Event: q.Get("event"), Action: q.Get("action"),
		Status: store.EventLogStatus(q.Get("status")), DeliveryID: q.Get("deliveryId")}
	if f.Status != "" && !slices.Contains(store.EventLogStatuses, f.Status) {
		allowed := make([]string, len(store.EventLogStatuses))
		for i, st := range store.EventLogStatuses {
			allowed[i] = string(st)
		}
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid status %q (allowed: %s)", f.Status, strings.Join(allowed, ", ")))
		return
	}
	var ok bool
	if f.Limit, ok = intParam(w, r, "limit", 50, 1, 200); !ok {
		return
	}
	if f.Offset, ok = intParam(w, r, "offset", 0, 0, 1<<30); !ok {
		return
	}
	if f.From, ok = timeParam(w, r, "from"); !ok {
		return
	}
	if f.To, ok = timeParam(w, r, "to"); !ok {
		return
	}
	list, total, err := s.d.Store.ListEventLog(r.Context(), f)
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	out := make([]apitypes.EventLogView, 0, len(list))
	for _, e := range list {
		out = append(out, viewOf(e))
	}
	writeJSON(w, http.StatusOK, apitypes.EventLogPage{Deliveries: out, Total: total, Limit: f.Limit, Offset: f.Offset})
}

// maxShownPayload caps the decompressed payload returned by the API.
const maxShownPayload = 64 << 20

// getEventLog returns one delivery's record with its decision trace; with
// includePayload=true also the payload, which needs
// event_log.read_payload.
func (s *server) getEventLog(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("deliveryId")
	e, err := s.d.Store.GetEventLog(r.Context(), r.URL.Query().Get("orgId"), id)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "Delivery not found")
		return
	} else if err != nil {
		s.internalError(w, r, err)
		return
	}
	out := apitypes.EventLogDetail{Delivery: viewOf(e)}
	if d, err := s.d.Store.GetDelivery(r.Context(), id); err == nil && len(d.Decisions) > 0 {
		out.Trace, out.ErrorMessage = d.Decisions, &d.Error
	}
	if v := r.URL.Query().Get("includePayload"); v == "true" || v == "1" {
		if p, ok := auth.PrincipalFrom(r.Context()); !ok || !auth.HasPermission(p.Role, auth.PermEventLogReadPayload) {
			writeError(w, http.StatusForbidden, "Reading payloads needs permission \""+string(auth.PermEventLogReadPayload)+"\"")
			return
		}
		switch {
		case e.PayloadOmittedReason != "":
			out.PayloadReadError = "payload omitted: " + e.PayloadOmittedReason
		default:
			raw, err := gunzip(e.PayloadGz)
			if err != nil {
				out.PayloadReadError = err.Error()
			} else if json.Valid(raw) {
				out.Payload = json.RawMessage(raw)
			} else {
				out.PayloadReadError = "stored payload is not JSON"
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("payload unreadable: %w", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, maxShownPayload+1))
	if err != nil {
		return nil, fmt.Errorf("payload unreadable: %w", err)
	}
	if len(out) > maxShownPayload {
		return nil, errors.New("payload larger than the display cap")
	}
	return out, nil
}

// ---------------------------------------------------------------- events

// EmitFunc persists and submits a kici_event; it returns the event id.
type EmitFunc func(ctx context.Context, req apitypes.EmitRequest) (eventID string, err error)

func (s *server) emitEvent(w http.ResponseWriter, r *http.Request) {
	if s.d.EmitEvent == nil {
		writeError(w, http.StatusServiceUnavailable, "Event emission not available")
		return
	}
	var req apitypes.EmitRequest
	if !decodeBody(w, r, &req) {
		return
	}
	req.EventName = strings.TrimSpace(req.EventName)
	switch {
	case req.EventName == "" || len(req.EventName) > 200:
		writeError(w, http.StatusBadRequest, "eventName is required (at most 200 characters)")
		return
	case len(req.Payload) == 0 || bytes.TrimSpace(req.Payload)[0] != '{':
		writeError(w, http.StatusBadRequest, "payload must be a JSON object")
		return
	case len(req.SourceRepo) > 200 || len(req.SourceRoutingKey) > 200 || len(req.OrgID) > 100:
		writeError(w, http.StatusBadRequest, "sourceRepo, sourceRoutingKey or orgId too long")
		return
	}
	id, err := s.d.EmitEvent(r.Context(), req)
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, apitypes.EmitResponse{EventID: id})
}

// ---------------------------------------------------------------- registrations

func (s *server) listRegistrations(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	org := q.Get("customerId")
	if org == "" {
		org = q.Get("org")
	}
	regs, err := s.d.Store.ListRegistrations(r.Context(), store.RegistrationFilter{OrgID: org, RoutingKey: q.Get("routingKey"),
		RepoIdentifier: q.Get("repoIdentifier"), TriggerType: q.Get("triggerType")})
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.RegistrationList{Registrations: derefAll(regs), Total: len(regs)})
}

func (s *server) getRegistration(w http.ResponseWriter, r *http.Request) {
	g, err := s.d.Store.GetRegistration(r.Context(), r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "Registration not found")
		return
	} else if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.RegistrationEnvelope{Registration: *g})
}

// sourceURLs is the guard of forge URLs (Deps.SourceURLs; nil refuses
// local addresses).
func (s *server) sourceURLs() *netguard.Guard {
	if s.d.SourceURLs == nil {
		return &netguard.Guard{}
	}
	return s.d.SourceURLs
}

// checkGitConfigURLs refuses a universal-git configuration whose API root
// or http(s) clone URL reaches this host (netguard); "" when allowed.
func (s *server) checkGitConfigURLs(ctx context.Context, g *store.GitConfig) string {
	clone := strings.NewReplacer("{repo}", "o/r", "{owner}", "o", "{name}", "r").Replace(g.GitURLTemplate)
	for _, c := range []struct{ field, url string }{{"gitConfig.apiBaseUrl", g.APIBaseURL}, {"gitConfig.gitUrlTemplate", clone}} {
		if u, err := url.Parse(c.url); c.url == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") {
			continue
		}
		if err := s.sourceURLs().CheckURL(ctx, c.field, c.url); err != nil {
			return err.Error()
		}
	}
	return ""
}

// validateGitConfig checks a universal-git configuration; it returns a 400
// message or "".
func validateGitConfig(g *store.GitConfig) string {
	if err := (universal.Config{Preset: g.Preset, PayloadPaths: g.PayloadPaths, EventMapping: g.EventMapping}).Validate(); err != nil {
		return "gitConfig: " + err.Error()
	}
	t := g.GitURLTemplate
	if !strings.Contains(t, "{repo}") && !(strings.Contains(t, "{owner}") && strings.Contains(t, "{name}")) {
		return "gitConfig.gitUrlTemplate must contain {repo} (or {owner} and {name})"
	}
	u, err := url.Parse(strings.NewReplacer("{repo}", "o/r", "{owner}", "o", "{name}", "r").Replace(t))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "file") || u.User != nil {
		return fmt.Sprintf("gitConfig.gitUrlTemplate %q must be an https, http or file URL without credentials (credentials go in credential)", t)
	}
	if g.APIBaseURL != "" {
		if u, err := url.Parse(g.APIBaseURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" {
			return fmt.Sprintf("gitConfig.apiBaseUrl %q must be an https or http URL without credentials or query", g.APIBaseURL)
		}
	}
	switch g.CredentialType {
	case "":
		if g.Credential != "" {
			return "gitConfig.credential needs credentialType pat or basic"
		}
	case "pat", "basic":
		if g.Credential == "" {
			return "gitConfig.credential is required with credentialType " + g.CredentialType
		}
	case "ssh":
		return "gitConfig.credentialType ssh is not supported by this build (use https with pat or basic)"
	default:
		return fmt.Sprintf("gitConfig.credentialType %q is not supported (pat, basic)", g.CredentialType)
	}
	return ""
}
