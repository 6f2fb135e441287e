package apitypes

// Acknowledgements: the one-flag answers of write routes that return no
// resource. Each flag is always true on success unless its doc says
// otherwise.

// Deleted answers the DELETE routes of sources, secrets, secret scopes,
// contexts, context variables and source overrides: {"deleted": true}.
type Deleted struct {
	Deleted bool `json:"deleted"`
}

// Created answers POST /secrets/scopes ({"created": true}) and POST
// /contexts/{name}/bind, where it is false (HTTP 200 instead of 201) when
// an identical binding already existed.
type Created struct {
	Created bool `json:"created"`
}

// Set answers the PUT routes of secrets, context variables and source
// overrides (upserts): {"set": true}.
type Set struct {
	Set bool `json:"set"`
}

// Updated answers PATCH /contexts/{name}/policy: {"updated": true}.
type Updated struct {
	Updated bool `json:"updated"`
}

// Revoked answers DELETE /tokens/{id}: {"revoked": true}, also for a token
// that was already revoked (an unknown id is 404, unlike KiCI).
type Revoked struct {
	Revoked bool `json:"revoked"`
}
