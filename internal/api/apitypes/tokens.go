package apitypes

import "time"

// AgentTokenPath is the agent-token family, outside the admin prefix as in
// KiCI (POST/GET /api/v1/agent-tokens, DELETE /api/v1/agent-tokens/{id}).
const AgentTokenPath = "/api/v1/agent-tokens"

// AdminTokenPrefix starts every admin token kici mints (auth.AdminTokenPrefix,
// repeated here for the client, which links no server package): kici-admin
// tells an admin token from a forge token by it.
const AdminTokenPrefix = "kadm_"

// AdminTokenView is one row of GET /admin/tokens. The hash is never
// returned. (KiCI returns the raw snake_case row; kici answers camelCase
// like the rest of its admin API.)
type AdminTokenView struct {
	ID         string     `json:"id"`
	Label      string     `json:"label"`
	Role       string     `json:"role"`
	RoutingKey *string    `json:"routingKey"`
	CreatedAt  time.Time  `json:"createdAt"`
	ExpiresAt  *time.Time `json:"expiresAt"`
	Revoked    bool       `json:"revoked"`
}

// AgentTokenView is one agent token in API answers (never the hash).
type AgentTokenView struct {
	ID          string `json:"id"`
	TokenPrefix string `json:"tokenPrefix"`
	// Labels is the token's label scope (see AgentTokenCreated; null =
	// no scope).
	Labels    []string       `json:"labels" nullable:"true"`
	AgentType AgentTokenKind `json:"agentType"`
	CreatedBy string         `json:"createdBy,omitempty"`
	CreatedAt time.Time      `json:"createdAt"`
	ExpiresAt *time.Time     `json:"expiresAt"`
	// MandatoryLabels are the token's taint (KiCI mandatory_labels);
	// listed for static tokens, omitted when none.
	MandatoryLabels []string `json:"mandatoryLabels,omitempty"`
}

// AdminTokenCreated is the body of POST /tokens (HTTP 201): the new
// token's id and its plaintext, shown this once (only its hash is kept).
type AdminTokenCreated struct {
	Token string `json:"token"`
	ID    string `json:"id"`
}

// AgentTokenCreated is the body of POST /api/v1/agent-tokens (HTTP 201):
// the new static token with its plaintext, shown this once.
type AgentTokenCreated struct {
	// ID names the token (GET and DELETE /api/v1/agent-tokens); Token is
	// the plaintext agents present (KICI_AGENT_TOKEN), TokenPrefix its
	// first characters, which listings show.
	ID          string `json:"id"`
	Token       string `json:"token"`
	TokenPrefix string `json:"tokenPrefix"`
	// Labels are the token's label scope: an agent using it may only
	// register these labels besides the platform ones (null when the
	// request named none: no scope; [] when it named an empty list:
	// platform labels only).
	Labels []string `json:"labels" nullable:"true"`
	// MandatoryLabels are the token's taint (KiCI mandatory_labels): its
	// agents are only given jobs whose runsOn names every one of them;
	// null when none.
	MandatoryLabels []string `json:"mandatoryLabels" nullable:"true"`
	// AgentType is always "static" here.
	AgentType AgentTokenKind `json:"agentType"`
	CreatedAt time.Time      `json:"createdAt"`
	// ExpiresAt is null for a token that never expires.
	ExpiresAt *time.Time `json:"expiresAt"`
}

// AgentTokenRevoked is the body of DELETE /api/v1/agent-tokens/{id}:
// Kicked counts the live agent connections authenticated with the token
// that were closed (close code 4010).
type AgentTokenRevoked struct {
	Kicked int `json:"kicked"`
}
