package apitypes

import "time"

// AgentTokenPath is the agent-token family, outside the admin prefix as in
// KiCI (POST/GET /api/v1/agent-tokens, DELETE /api/v1/agent-tokens/{id}).
const AgentTokenPath = "/api/v1/agent-tokens"

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
	ID          string     `json:"id"`
	TokenPrefix string     `json:"tokenPrefix"`
	Labels      []string   `json:"labels"`
	AgentType   string     `json:"agentType"`
	CreatedBy   string     `json:"createdBy,omitempty"`
	CreatedAt   time.Time  `json:"createdAt"`
	ExpiresAt   *time.Time `json:"expiresAt"`
	// MandatoryLabels are the token's taint (KiCI mandatory_labels);
	// listed for static tokens, omitted when none.
	MandatoryLabels []string `json:"mandatoryLabels,omitempty"`
}
