package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/store"
)

// Source provider types accepted by POST /generic-sources.
const (
	// ProviderGeneric is a plain generic webhook source.
	ProviderGeneric = "generic"
	// ProviderLocal is a git repository on the orchestrator's host.
	ProviderLocal = "local"
)

// VerificationHMAC is the only verification method implemented: an
// HMAC-SHA256 of the raw body in X-Kici-Signature-256 / X-Hub-Signature-256.
const VerificationHMAC = "hmac_sha256"

var (
	sourceNameRE = regexp.MustCompile(`^[a-z0-9._-]+$`)
	orgIDRE      = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
)

// CreateSourceRequest is the body of POST /generic-sources. Unknown fields are
// rejected.
type CreateSourceRequest struct {
	// OrgID is the owning organisation ([A-Za-z0-9._-], ≤ 100 chars).
	OrgID string `json:"orgId"`
	// Name is unique within the org ([a-z0-9._-], ≤ 100 chars); it is the
	// last segment of the webhook URL.
	Name string `json:"name"`
	// ProviderType is "generic" (default) or "local".
	ProviderType string `json:"providerType,omitempty"`
	// VerificationMethod defaults to, and must be, "hmac_sha256".
	VerificationMethod string `json:"verificationMethod,omitempty"`
	// LocalConfig is required for local sources, refused otherwise.
	LocalConfig *LocalConfig `json:"localConfig,omitempty"`
}

// LocalConfig configures a local source.
type LocalConfig struct {
	// Path is the absolute path of a git repository on the orchestrator host.
	Path string `json:"path"`
}

// SourceView is a source in API responses (never its secret).
type SourceView struct {
	ID                 string       `json:"id"`
	OrgID              string       `json:"orgId"`
	Name               string       `json:"name"`
	ProviderType       string       `json:"providerType"`
	RoutingKey         string       `json:"routingKey"`
	VerificationMethod string       `json:"verificationMethod"`
	Enabled            bool         `json:"enabled"`
	LocalConfig        *LocalConfig `json:"localConfig"`
	// WebhookPath is where deliveries are posted: /webhook/<org>/generic/<name>.
	WebhookPath string    `json:"webhookPath"`
	CreatedAt   time.Time `json:"createdAt"`
}

// NewSourceView converts a store source.
func NewSourceView(s *store.Source) SourceView {
	v := SourceView{
		ID: s.ID, OrgID: s.OrgID, Name: s.Name, ProviderType: s.Provider, RoutingKey: s.RoutingKey,
		VerificationMethod: s.VerificationMethod, Enabled: s.Enabled, CreatedAt: s.CreatedAt,
		WebhookPath: "/webhook/" + s.OrgID + "/generic/" + s.Name,
	}
	if s.LocalPath != "" {
		v.LocalConfig = &LocalConfig{Path: s.LocalPath}
	}
	return v
}

func (s *server) createSource(w http.ResponseWriter, r *http.Request) {
	var req CreateSourceRequest
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
	id := uuid.NewString()
	src := &store.Source{
		ID: id, OrgID: req.OrgID, Name: req.Name, Provider: req.ProviderType,
		RoutingKey:         "generic:" + req.OrgID + ":" + id,
		VerificationMethod: req.VerificationMethod,
		WebhookSecret:      hex.EncodeToString(secret),
		Enabled:            true,
		CreatedAt:          time.Now().UTC().Truncate(time.Millisecond),
	}
	if req.LocalConfig != nil {
		src.LocalPath = req.LocalConfig.Path
	}
	err := s.d.Store.CreateSource(r.Context(), src)
	if errors.Is(err, store.ErrConflict) {
		writeError(w, http.StatusConflict, fmt.Sprintf("A source named %q already exists in org %q", req.Name, req.OrgID))
		return
	} else if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"source": NewSourceView(src)})
}

// validateSource normalises req and returns a 400 message, or "".
func (s *server) validateSource(ctx context.Context, req *CreateSourceRequest) string {
	switch {
	case req.OrgID == "":
		return "orgId is required"
	case len(req.OrgID) > 100 || !orgIDRE.MatchString(req.OrgID):
		return fmt.Sprintf("Invalid orgId %q: use letters, digits, '.', '_' or '-' (at most 100)", req.OrgID)
	case req.Name == "":
		return "name is required"
	case len(req.Name) > 100 || !sourceNameRE.MatchString(req.Name):
		return fmt.Sprintf("Invalid name %q: use lower-case letters, digits, '.', '_' or '-' (at most 100)", req.Name)
	}
	if req.ProviderType == "" {
		req.ProviderType = ProviderGeneric
	}
	if req.VerificationMethod == "" {
		req.VerificationMethod = VerificationHMAC
	}
	if req.VerificationMethod != VerificationHMAC {
		return fmt.Sprintf("verificationMethod %q is not supported (supported: %s)", req.VerificationMethod, VerificationHMAC)
	}
	switch req.ProviderType {
	case ProviderGeneric:
		if req.LocalConfig != nil {
			return "localConfig is only allowed with providerType \"local\""
		}
	case ProviderLocal:
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
		return fmt.Sprintf("Invalid providerType %q (allowed: %s, %s)", req.ProviderType, ProviderGeneric, ProviderLocal)
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
	views := make([]SourceView, 0, len(srcs))
	for _, src := range srcs {
		views = append(views, NewSourceView(src))
	}
	writeJSON(w, http.StatusOK, map[string]any{"sources": views})
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
		writeJSON(w, http.StatusOK, map[string]any{"source": NewSourceView(src)})
	}
}

func (s *server) getSourceSecret(w http.ResponseWriter, r *http.Request) {
	if src := s.loadSource(w, r); src != nil {
		writeJSON(w, http.StatusOK, map[string]any{"routingKey": src.RoutingKey, "webhookSecret": src.WebhookSecret})
	}
}
