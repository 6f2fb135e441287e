package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trigger"
)

// Verification methods of generic sources, as in KiCI
// (see docs/kici-compatibility.md#ingress).
const (
	// VerificationHMAC: an HMAC-SHA256 of the raw body in
	// X-Kici-Signature-256 / X-Hub-Signature-256 (or verificationConfig.header).
	VerificationHMAC = "hmac_sha256"
	// VerificationBearer: "Authorization: Bearer <secret>" (or the raw
	// secret in verificationConfig.header), compared in constant time.
	VerificationBearer = "bearer_token"
	// VerificationIPAllowlist: the client address must be in
	// verificationConfig.ipAllowlist (exact match).
	VerificationIPAllowlist = "ip_allowlist"
	// VerificationNone accepts every request.
	VerificationNone = "none"
)

var (
	// Names and org ids are URL path segments of the webhook route, so they
	// must start with a letter or digit ("." and ".." would never route).
	sourceNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	orgIDRE      = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
)

// NewSourceView converts a store source.
func NewSourceView(s *store.Source) apitypes.SourceView {
	v := apitypes.SourceView{
		ID: s.ID, OrgID: s.OrgID, Name: s.Name, ProviderType: s.Provider, RoutingKey: s.RoutingKey,
		VerificationMethod: s.VerificationMethod, Enabled: s.Enabled, CreatedAt: s.CreatedAt,
		WebhookPath: "/webhook/" + s.OrgID + "/generic/" + s.Name,
	}
	if s.Provider == provider.GitHub {
		v.WebhookPath = "/webhook/" + s.OrgID + "/github/" + s.ID
	}
	if s.LocalPath != "" {
		v.LocalConfig = &apitypes.LocalConfig{Path: s.LocalPath}
	}
	return v
}

func (s *server) createSource(w http.ResponseWriter, r *http.Request) {
	var req apitypes.CreateSourceRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if msg := s.validateSource(r.Context(), &req); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		s.internalError(w, r, err)
		return
	}
	secretText := hex.EncodeToString(secret)
	if req.VerificationMethod == VerificationIPAllowlist || req.VerificationMethod == VerificationNone {
		secretText = ""
	}
	id := uuid.NewString()
	src := &store.Source{
		ID: id, OrgID: req.OrgID, Name: req.Name, Provider: req.ProviderType,
		RoutingKey:         "generic:" + req.OrgID + ":" + id,
		VerificationMethod: req.VerificationMethod,
		WebhookSecret:      secretText,
		Enabled:            true,
		CreatedAt:          time.Now().UTC().Truncate(time.Millisecond),
	}
	if req.LocalConfig != nil {
		src.LocalPath = req.LocalConfig.Path
	}
	set := &store.SourceSettings{MaxPayloadBytes: req.MaxPayloadBytes, RateLimitRPM: req.RateLimitRPM, Git: (*store.GitConfig)(req.GitConfig),
		IdempotencyKeyHeader: req.IdempotencyKeyHeader, IdempotencyKeyPath: req.IdempotencyKeyPath}
	if vc := req.VerificationConfig; vc != nil {
		set.IPAllowlist = vc.IPAllowlist
		if req.VerificationMethod == VerificationHMAC {
			set.SignatureHeader = vc.Header
		} else {
			set.TokenHeader = vc.Header
		}
	}
	err := s.d.Store.CreateSourceWithSettings(r.Context(), src, set, nil)
	if errors.Is(err, store.ErrConflict) {
		writeError(w, http.StatusConflict, fmt.Sprintf("A source named %q already exists in org %q", req.Name, req.OrgID))
		return
	} else if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, apitypes.SourceEnvelope{Source: NewSourceView(src)})
}

// validateSource normalises req and returns a 400 message, or "".
func (s *server) validateSource(ctx context.Context, req *apitypes.CreateSourceRequest) string {
	switch {
	case req.OrgID == "":
		return "orgId is required"
	case len(req.OrgID) > 100 || !orgIDRE.MatchString(req.OrgID):
		return fmt.Sprintf("Invalid orgId %q: start with a letter or digit, then letters, digits, '.', '_' or '-' (at most 100)", req.OrgID)
	case req.Name == "":
		return "name is required"
	case len(req.Name) > 100 || !sourceNameRE.MatchString(req.Name):
		return fmt.Sprintf("Invalid name %q: start with a lower-case letter or digit, then lower-case letters, digits, '.', '_' or '-' (at most 100)", req.Name)
	}
	if req.ProviderType == "" {
		req.ProviderType = apitypes.ProviderGeneric
	}
	if req.VerificationMethod == "" {
		req.VerificationMethod = VerificationHMAC
	}
	if msg := validateVerification(req); msg != "" {
		return msg
	}
	if req.GitConfig != nil {
		if req.ProviderType != apitypes.ProviderGeneric {
			return "gitConfig is only allowed with providerType \"generic\""
		}
		if msg := validateGitConfig((*store.GitConfig)(req.GitConfig)); msg != "" {
			return msg
		}
		if msg := s.checkGitConfigURLs(ctx, (*store.GitConfig)(req.GitConfig)); msg != "" {
			return msg
		}
	}
	switch req.ProviderType {
	case apitypes.ProviderGeneric:
		if req.LocalConfig != nil {
			return "localConfig is only allowed with providerType \"local\""
		}
	case apitypes.ProviderLocal:
		if req.LocalConfig == nil || req.LocalConfig.Path == "" {
			return "localConfig.path is required for a local source"
		}
		p := req.LocalConfig.Path
		if !filepath.IsAbs(p) {
			return fmt.Sprintf("localConfig.path %q must be absolute", p)
		}
		p = filepath.Clean(p)
		req.LocalConfig.Path = p
		if msg := s.checkGitRepo(ctx, p); msg != "" {
			return msg
		}
	default:
		return fmt.Sprintf("Invalid providerType %q (allowed: %s, %s)", req.ProviderType, apitypes.ProviderGeneric, apitypes.ProviderLocal)
	}
	return ""
}

// checkGitRepo runs `git -C path rev-parse --git-dir`; returns a message when
// path is not a git repository.
func (s *server) checkGitRepo(ctx context.Context, path string) string {
	git := s.d.GitCommand
	if git == "" {
		git = "git"
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, git, "-C", path, "rev-parse", "--git-dir")
	cmd.Env = append(cmd.Environ(), "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		detail := strings.TrimSpace(string(out))
		if detail == "" {
			detail = err.Error()
		}
		return fmt.Sprintf("localConfig.path %q is not a git repository on the orchestrator host: %s", path, detail)
	}
	return ""
}

func (s *server) listSources(w http.ResponseWriter, r *http.Request) {
	srcs, err := s.d.Store.ListSources(r.Context(), r.URL.Query().Get("orgId"))
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	views := make([]apitypes.SourceView, 0, len(srcs))
	for _, src := range srcs {
		if rk := callerRoutingKey(r); rk != "" && src.RoutingKey != rk {
			continue // a scoped token sees only its own key's sources
		}
		views = append(views, NewSourceView(src))
	}
	writeJSON(w, http.StatusOK, apitypes.SourceList{Sources: views})
}

// loadSource fetches the {id} source or writes 404/500 and returns nil.
func (s *server) loadSource(w http.ResponseWriter, r *http.Request) *store.Source {
	src, err := s.d.Store.GetSource(r.Context(), r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "Source not found")
		return nil
	} else if err != nil {
		s.internalError(w, r, err)
		return nil
	}
	return src
}

func (s *server) getSource(w http.ResponseWriter, r *http.Request) {
	if src := s.loadSource(w, r); src != nil {
		writeJSON(w, http.StatusOK, apitypes.SourceEnvelope{Source: NewSourceView(src)})
	}
}

func (s *server) getSourceSecret(w http.ResponseWriter, r *http.Request) {
	if src := s.loadSource(w, r); src != nil {
		writeJSON(w, http.StatusOK, apitypes.SourceWebhookSecret{RoutingKey: src.RoutingKey, WebhookSecret: src.WebhookSecret})
	}
}

// validateVerification checks the verification method, its config and the
// ingress limits of a generic-source request; it returns a 400 message or "".
func validateVerification(req *apitypes.CreateSourceRequest) string {
	vc := req.VerificationConfig
	switch req.VerificationMethod {
	case VerificationHMAC, VerificationBearer:
		if vc != nil && len(vc.IPAllowlist) > 0 {
			return "verificationConfig.ipAllowlist is only allowed with verificationMethod \"ip_allowlist\""
		}
	case VerificationIPAllowlist:
		if vc == nil || len(vc.IPAllowlist) == 0 {
			return "verificationConfig.ipAllowlist is required for verificationMethod \"ip_allowlist\""
		}
		if len(vc.IPAllowlist) > 1000 {
			return "verificationConfig.ipAllowlist holds at most 1000 addresses"
		}
		for i, a := range vc.IPAllowlist {
			ip := net.ParseIP(a)
			if ip == nil {
				return fmt.Sprintf("verificationConfig.ipAllowlist[%d] %q is not an IP address", i, a)
			}
			vc.IPAllowlist[i] = ip.String()
		}
		if vc.Header != "" {
			return "verificationConfig.header is not used by verificationMethod \"ip_allowlist\""
		}
	case VerificationNone:
		if vc != nil && (vc.Header != "" || len(vc.IPAllowlist) > 0) {
			return "verificationConfig is not used by verificationMethod \"none\""
		}
	default:
		return fmt.Sprintf("verificationMethod %q is not supported (supported: %s, %s, %s, %s)", req.VerificationMethod,
			VerificationHMAC, VerificationBearer, VerificationIPAllowlist, VerificationNone)
	}
	if vc != nil && vc.Header != "" && (len(vc.Header) > 100 || !httpHeaderRE.MatchString(vc.Header)) {
		return fmt.Sprintf("verificationConfig.header %q is not a valid header name", vc.Header)
	}
	if req.MaxPayloadBytes < 0 || req.MaxPayloadBytes > 10<<20 {
		return "maxPayloadBytes must be between 1 and 10485760 (0 = the default 1048576)"
	}
	if req.RateLimitRPM < -1 || req.RateLimitRPM > 1000000 {
		return "rateLimitRpm must be -1 (unlimited), 0 (the default 600) or at most 1000000"
	}
	if msg := checkIdempotencyKey(req); msg != "" {
		return msg
	}
	return ""
}

// checkIdempotencyKey validates the idempotency-key settings: at most one of
// header and path, a valid header name, a JSONPath that compiles.
func checkIdempotencyKey(req *apitypes.CreateSourceRequest) string {
	h, p := req.IdempotencyKeyHeader, req.IdempotencyKeyPath
	if h == "" && p == "" {
		return ""
	}
	if req.ProviderType != apitypes.ProviderGeneric {
		return "idempotencyKeyHeader and idempotencyKeyPath are only allowed with providerType \"generic\""
	}
	if h != "" && p != "" {
		return "set idempotencyKeyHeader or idempotencyKeyPath, not both"
	}
	if h != "" && (len(h) > 100 || !httpHeaderRE.MatchString(h)) {
		return fmt.Sprintf("idempotencyKeyHeader %q is not a valid header name", h)
	}
	if p != "" {
		if len(p) > 500 {
			return "idempotencyKeyPath is longer than 500 characters"
		}
		if _, err := trigger.CompileJSONPath(p); err != nil {
			return fmt.Sprintf("idempotencyKeyPath %q: %v", p, err)
		}
	}
	return ""
}

var httpHeaderRE = regexp.MustCompile(`^[A-Za-z0-9-]+$`)
