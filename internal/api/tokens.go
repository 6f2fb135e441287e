package api

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/store"
)

// AgentKicker closes live agent connections of a revoked token
// (dispatch.Dispatcher.KickToken).
type AgentKicker interface {
	// KickToken closes every socket authenticated with tokenID (close 4010)
	// and returns how many it closed.
	KickToken(tokenID string) int
}

type createTokenBody struct {
	Label      string  `json:"label"`
	Role       string  `json:"role"`
	RoutingKey *string `json:"routingKey"`
	ExpiresAt  *string `json:"expiresAt"`
}

func (s *server) createAdminToken(w http.ResponseWriter, r *http.Request) {
	var b createTokenBody
	if !decodeBody(w, r, &b) {
		return
	}
	b.Label = strings.TrimSpace(b.Label)
	if b.Label == "" || len(b.Label) > 255 {
		writeError(w, http.StatusBadRequest, "label must be 1-255 characters")
		return
	}
	if !auth.IsRole(auth.Role(b.Role)) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("role %q must be owner, admin or auditor", b.Role))
		return
	}
	rk := ""
	if b.RoutingKey != nil {
		rk = strings.TrimSpace(*b.RoutingKey)
		if rk == "" || len(rk) > 255 {
			writeError(w, http.StatusBadRequest, "routingKey must be 1-255 characters, or null for an unscoped token")
			return
		}
	}
	t := &store.AdminToken{ID: uuid.NewString(), Label: b.Label, Role: b.Role, CreatedAt: time.Now().UTC()}
	if b.ExpiresAt != nil {
		exp, err := time.Parse(time.RFC3339Nano, *b.ExpiresAt)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("expiresAt %q must be an ISO 8601 timestamp with a time zone", *b.ExpiresAt))
			return
		}
		if !exp.After(time.Now()) {
			writeError(w, http.StatusBadRequest, "expiresAt must be in the future")
			return
		}
		exp = exp.UTC()
		t.ExpiresAt = &exp
	}
	plain := auth.NewAdminTokenPlaintext()
	t.TokenHash = auth.Hash(plain)
	detail := "role=" + b.Role
	if rk != "" {
		detail += " routingKey=" + rk
	}
	if err := s.d.Store.CreateAdminTokenAudited(r.Context(), t, rk, auditEntry(r, "token.create", "admin_token:"+t.ID, detail)); err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, apitypes.AdminTokenCreated{Token: plain, ID: t.ID})
}

func (s *server) listAdminTokens(w http.ResponseWriter, r *http.Request) {
	toks, err := s.d.Store.ListAdminTokens(r.Context())
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	keys, err := s.d.Store.ListAdminTokenRoutingKeys(r.Context())
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	out := make([]apitypes.AdminTokenView, 0, len(toks))
	for _, t := range toks {
		v := apitypes.AdminTokenView{ID: t.ID, Label: t.Label, Role: t.Role, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, Revoked: t.Revoked}
		if rk, ok := keys[t.ID]; ok {
			v.RoutingKey = &rk
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, apitypes.AdminTokenList{Tokens: out})
}

func (s *server) revokeAdminToken(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	changed, err := s.d.Store.RevokeAdminTokenAudited(r.Context(), id, auditEntry(r, "token.revoke", "admin_token:"+id, ""))
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	if !changed {
		// KiCI answers {revoked:true} for unknown ids too; we say 404 so a
		// mistyped id is never taken for a revoked token.
		tokens, err := s.d.Store.ListAdminTokens(r.Context())
		if err != nil {
			s.internalError(w, r, err)
			return
		}
		if !slices.ContainsFunc(tokens, func(t *store.AdminToken) bool { return t.ID == id }) {
			writeError(w, http.StatusNotFound, "Token not found")
			return
		}
	}
	writeJSON(w, http.StatusOK, apitypes.Revoked{Revoked: true})
}

// ---------------------------------------------------------------- agent tokens

type createAgentTokenBody struct {
	Labels          []string `json:"labels"`
	MandatoryLabels []string `json:"mandatoryLabels"`
	ExpiresAt       *string  `json:"expiresAt"`
}

func agentTokenView(t *store.AgentToken) apitypes.AgentTokenView {
	return apitypes.AgentTokenView{ID: t.ID, TokenPrefix: t.Prefix, Labels: t.Labels, AgentType: t.Kind,
		CreatedBy: t.BoundAgentID, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt}
}

func (s *server) createAgentToken(w http.ResponseWriter, r *http.Request) {
	var b createAgentTokenBody
	if !decodeBody(w, r, &b) {
		return
	}
	labels, msg := cleanLabels(b.Labels)
	if msg == "" {
		b.MandatoryLabels, msg = cleanLabels(b.MandatoryLabels)
	}
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if b.Labels != nil && labels == nil {
		labels = []string{} // an explicit empty scope: only platform labels
	}
	plain := auth.NewAgentTokenPlaintext()
	t := &store.AgentToken{ID: uuid.NewString(), TokenHash: auth.Hash(plain), Prefix: auth.Prefix(plain),
		Kind: store.AgentTokenStatic, Labels: labels, MandatoryLabels: b.MandatoryLabels, CreatedAt: time.Now().UTC()}
	if b.ExpiresAt != nil {
		exp, err := time.Parse(time.RFC3339Nano, *b.ExpiresAt)
		if err != nil || !exp.After(time.Now()) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("expiresAt %q must be a future ISO 8601 timestamp with a time zone", *b.ExpiresAt))
			return
		}
		exp = exp.UTC()
		t.ExpiresAt = &exp
	}
	detail := "labels=" + strings.Join(labels, ",") + " mandatoryLabels=" + strings.Join(b.MandatoryLabels, ",")
	if err := s.d.Store.CreateAgentTokenAudited(r.Context(), t, auditEntry(r, "agent_token.create", "agent_token:"+t.ID, detail)); err != nil {
		s.internalError(w, r, err)
		return
	}
	v := agentTokenView(t)
	writeJSON(w, http.StatusCreated, apitypes.AgentTokenCreated{ID: v.ID, Token: plain, TokenPrefix: v.TokenPrefix,
		Labels: v.Labels, MandatoryLabels: t.MandatoryLabels, AgentType: v.AgentType, CreatedAt: v.CreatedAt, ExpiresAt: v.ExpiresAt})
}

// cleanLabels validates and de-duplicates token labels: 1–255 characters,
// no blanks or commas, not in the reserved kici: namespace. It returns a
// 400 message on bad input.
func cleanLabels(in []string) ([]string, string) {
	seen := map[string]bool{}
	var out []string
	for _, l := range in {
		l = strings.TrimSpace(l)
		if l == "" || len(l) > 255 || strings.ContainsAny(l, " \t\r\n,") {
			return nil, fmt.Sprintf("label %q must be 1-255 characters without blanks or commas", l)
		}
		if strings.HasPrefix(l, "kici:") {
			return nil, fmt.Sprintf("label %q: the kici: prefix is reserved for labels the agent reports itself", l)
		}
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out, ""
}

func (s *server) listAgentTokens(w http.ResponseWriter, r *http.Request) {
	typ := store.AgentTokenKind(r.URL.Query().Get("type"))
	if typ != "" && typ != store.AgentTokenStatic && typ != store.AgentTokenEphemeral {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("type %q must be static or ephemeral", typ))
		return
	}
	toks, err := s.d.Store.ListAgentTokens(r.Context())
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	out := []apitypes.AgentTokenView{}
	for _, t := range toks {
		if t.RevokedAt != nil || (typ != "" && t.Kind != typ) {
			continue
		}
		v := agentTokenView(t)
		if t.Kind == store.AgentTokenStatic {
			// Static tokens are few (minted by hand), so one lookup each.
			if v.MandatoryLabels, err = s.d.Store.AgentTokenMandatoryLabels(r.Context(), t.ID); err != nil {
				s.internalError(w, r, err)
				return
			}
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, apitypes.AgentTokenList{Tokens: out})
}

func (s *server) revokeAgentToken(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	err := s.d.Store.RevokeAgentTokenAudited(r.Context(), id, time.Now().UTC(), auditEntry(r, "agent_token.revoke", "agent_token:"+id, ""))
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "Agent token not found or already revoked")
		return
	} else if err != nil {
		s.internalError(w, r, err)
		return
	}
	kicked := 0
	if s.d.Agents != nil {
		kicked = s.d.Agents.KickToken(id)
	}
	writeJSON(w, http.StatusOK, apitypes.AgentTokenRevoked{Kicked: kicked})
}

// ---------------------------------------------------------------- secrets
