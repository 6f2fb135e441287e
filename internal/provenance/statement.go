package provenance

import (
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// In-toto and SLSA identifiers (in-toto Statement v1, SLSA provenance v1;
// see docs/kici-compatibility.md#provenance).
const (
	// StatementType is the in-toto Statement v1 _type.
	StatementType = "https://in-toto.io/Statement/v1"
	// PredicateTypeSLSA is the SLSA provenance v1 predicate type.
	PredicateTypeSLSA = "https://slsa.dev/provenance/v1"
	// BuildType is KiCI's workflow build type.
	BuildType = "https://kici.dev/buildtypes/workflow/v1"
	// PayloadType is the DSSE payload type of an in-toto statement.
	PayloadType = "application/vnd.in-toto+json"
)

// Statement is an in-toto Statement v1 carrying a SLSA provenance v1
// predicate. Only the fields kici emits are modelled; Validate applies the
// published field rules to them.
type Statement struct {
	Type          string         `json:"_type"`
	Subject       []Subject      `json:"subject"`
	PredicateType string         `json:"predicateType"`
	Predicate     SLSAProvenance `json:"predicate"`
}

// Subject is an in-toto ResourceDescriptor naming one artifact. Digest maps
// an algorithm to a lowercase hex value; kici always sets sha256.
type Subject struct {
	Name   string            `json:"name,omitempty"`
	URI    string            `json:"uri,omitempty"`
	Digest map[string]string `json:"digest"`
}

// SLSAProvenance is the SLSA provenance v1 predicate.
type SLSAProvenance struct {
	BuildDefinition BuildDefinition `json:"buildDefinition"`
	RunDetails      RunDetails      `json:"runDetails"`
}

// BuildDefinition is SLSA's buildDefinition for kici's workflow build type.
type BuildDefinition struct {
	BuildType            string               `json:"buildType"`
	ExternalParameters   ExternalParameters   `json:"externalParameters"`
	InternalParameters   InternalParameters   `json:"internalParameters"`
	ResolvedDependencies []ResourceDescriptor `json:"resolvedDependencies,omitempty"`
}

// ExternalParameters holds the workflow identity (KiCI).
type ExternalParameters struct {
	Workflow WorkflowParams `json:"workflow"`
}

// WorkflowParams names the workflow: repository identifier, git ref and
// path (KiCI sets path to the workflow_ref claim, "<workflow name>@<sha>").
type WorkflowParams struct {
	Repository string `json:"repository"`
	Ref        string `json:"ref"`
	Path       string `json:"path"`
}

// InternalParameters are the orchestrator's own identifiers. AttestedOn is
// the signing time (RFC 3339): the identity token must have been valid at
// that instant.
type InternalParameters struct {
	Commit     string `json:"commit,omitempty"`
	RunID      string `json:"runId,omitempty"`
	JobID      string `json:"jobId,omitempty"`
	AttestedOn string `json:"attestedOn,omitempty"`
}

// ResourceDescriptor is an in-toto ResourceDescriptor (resolvedDependencies).
type ResourceDescriptor struct {
	Name   string            `json:"name,omitempty"`
	URI    string            `json:"uri,omitempty"`
	Digest map[string]string `json:"digest,omitempty"`
}

// RunDetails is SLSA's runDetails.
type RunDetails struct {
	Builder  Builder        `json:"builder"`
	Metadata *BuildMetadata `json:"metadata,omitempty"`
}

// Builder identifies the orchestrator: id "<issuer>/orchestrator/<id>".
type Builder struct {
	ID      string            `json:"id"`
	Version map[string]string `json:"version,omitempty"`
}

// BuildMetadata is SLSA's runDetails.metadata; times are RFC 3339 with an
// offset.
type BuildMetadata struct {
	InvocationID string `json:"invocationId,omitempty"`
	StartedOn    string `json:"startedOn,omitempty"`
	FinishedOn   string `json:"finishedOn,omitempty"`
}

// digestAlgs are the digest algorithms accepted in subjects (KiCI).
var digestAlgs = map[string]int{"sha256": 64, "sha512": 128, "sha1": 40, "gitCommit": 40, "dirHash": 64}

var lowerHex = regexp.MustCompile(`^[0-9a-f]+$`)

// Validate checks the published field rules: the Statement v1 _type, at
// least one subject each with a non-empty digest map of known algorithms and
// lowercase hex values of the right length, the SLSA v1 predicate type, a
// buildType, a builder id, and RFC 3339 metadata times. Errors name the field.
func (s *Statement) Validate() error {
	var errs []error
	bad := func(f string, a ...any) { errs = append(errs, fmt.Errorf(f, a...)) }
	if s.Type != StatementType {
		bad("_type must be %q", StatementType)
	}
	if len(s.Subject) == 0 {
		bad("subject must have at least one entry")
	}
	for i, sub := range s.Subject {
		if len(sub.Digest) == 0 {
			bad("subject[%d].digest must not be empty", i)
		}
		for alg, v := range sub.Digest {
			n, ok := digestAlgs[alg]
			switch {
			case !ok:
				bad("subject[%d].digest: unsupported algorithm %q", i, alg)
			case !lowerHex.MatchString(v):
				bad("subject[%d].digest.%s must be lowercase hex", i, alg)
			case alg != "gitCommit" && len(v) != n:
				bad("subject[%d].digest.%s must be %d hex characters", i, alg, n)
			}
		}
	}
	if s.PredicateType != PredicateTypeSLSA {
		bad("predicateType must be %q", PredicateTypeSLSA)
	}
	bd := s.Predicate.BuildDefinition
	if bd.BuildType == "" {
		bad("predicate.buildDefinition.buildType is required")
	}
	if s.Predicate.RunDetails.Builder.ID == "" {
		bad("predicate.runDetails.builder.id is required")
	}
	if m := s.Predicate.RunDetails.Metadata; m != nil {
		for name, v := range map[string]string{"startedOn": m.StartedOn, "finishedOn": m.FinishedOn} {
			if v != "" {
				if _, err := time.Parse(time.RFC3339, v); err != nil {
					bad("predicate.runDetails.metadata.%s must be RFC 3339", name)
				}
			}
		}
	}
	if bd.BuildType == BuildType {
		w := bd.ExternalParameters.Workflow
		if w.Repository == "" || w.Ref == "" || w.Path == "" {
			bad("externalParameters.workflow needs repository, ref and path")
		}
		if _, err := time.Parse(time.RFC3339, bd.InternalParameters.AttestedOn); err != nil {
			bad("internalParameters.attestedOn must be RFC 3339")
		}
	}
	return errors.Join(errs...)
}

// ParseDigest parses "sha256:<64 lowercase hex>" (the form used by the CLI,
// the API and the protocol) and returns the hex part.
func ParseDigest(s string) (string, error) {
	alg, v, ok := strings.Cut(s, ":")
	if !ok || alg != "sha256" {
		return "", fmt.Errorf("digest %q must be sha256:<64 hex characters>", s)
	}
	return ValidSHA256(v)
}

// ValidSHA256 checks a SHA-256 hex digest (64 hex characters) and returns it
// lowercased.
func ValidSHA256(v string) (string, error) {
	v = strings.ToLower(v)
	if len(v) != 64 {
		return "", fmt.Errorf("sha256 digest must be 64 hex characters, got %d", len(v))
	}
	if _, err := hex.DecodeString(v); err != nil {
		return "", fmt.Errorf("sha256 digest is not hex")
	}
	return v, nil
}
