package apitypes

import "time"

// ArtifactView is an artifact in API answers.
type ArtifactView struct {
	Name      string    `json:"name"`
	RunID     string    `json:"runId"`
	JobID     string    `json:"jobId"`
	JobName   string    `json:"jobName"`
	SizeBytes int64     `json:"sizeBytes"`
	SHA256    string    `json:"sha256"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
}
