package apitypes

// SecretScopeList is the body of GET /secrets/scopes?orgId=: the org's
// secret scopes as "pg:<scope>" (KiCI's "<backend>:<scope>" naming; the
// orchestrator's own store is kici's only backend), sorted by scope.
type SecretScopeList struct {
	Scopes []string `json:"scopes"`
}

// SecretKeyList is the body of GET /secrets/keys?orgId=&scope=: the key
// names of the scope's secrets, sorted; values are never returned.
type SecretKeyList struct {
	Keys []string `json:"keys"`
}

// KeyRotation is the body of POST /rotate-key: how many sealed values were
// re-encrypted with the current master key, secrets and provenance signing
// keys apart.
type KeyRotation struct {
	ReEncrypted            int `json:"reEncrypted"`
	ReEncryptedSigningKeys int `json:"reEncryptedSigningKeys"`
}

// AccessLogList is the body of GET /access-log: one page of entries,
// newest first.
type AccessLogList struct {
	Entries []AccessLogEntry `json:"entries"`
}
