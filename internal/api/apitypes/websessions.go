package apitypes

import "time"

// WebSessionView is one web UI session in API answers (never its cookie
// or CSRF token).
type WebSessionView struct {
	ID string `json:"id"`
	// Kind is "person" (signed in through an identity provider) or
	// "token" (signed in with an admin token).
	Kind WebSessionKind `json:"kind"`
	// Subject is the person's identity ("gitea:alice",
	// "oidc:<issuer-host>:<sub>") or "service:<token id>".
	Subject string `json:"subject"`
	// Name is the person's display name or the token's label.
	Name string `json:"name"`
	// Role and RoutingKey are a person's mapped role and scope (a token
	// session's are the token's, resolved on each request).
	Role       string    `json:"role"`
	RoutingKey string    `json:"routingKey"`
	Client     string    `json:"client"`
	CreatedAt  time.Time `json:"createdAt"`
	LastSeenAt time.Time `json:"lastSeenAt"`
}

// WebSessionList is the body of GET /web-sessions.
type WebSessionList struct {
	Sessions []WebSessionView `json:"sessions"`
}

// WebSessionsRevoked is the body of DELETE /web-sessions?subject=: how
// many sessions of the subject were ended.
type WebSessionsRevoked struct {
	Revoked int `json:"revoked"`
}
