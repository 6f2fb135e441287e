package provenance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/google/uuid"

	"kici.dev/kici/internal/store"
)

// MaxSubjects caps the subjects of one attestation request.
const MaxSubjects = 64

// MaxSubjectNameLen caps a subject name, in bytes.
const MaxSubjectNameLen = 1024

// ErrJobNotAttestable is returned by Attest when the job does not belong to
// the run or has already finished (KiCI refuses terminal jobs).
var ErrJobNotAttestable = errors.New("provenance: job is not running in this run")

// ErrDisabled is returned when no issuer is configured.
var ErrDisabled = errors.New("provenance: signing is not configured (KICI_ORCHESTRATOR_PROVENANCE_ISSUER)")

// Config configures a Service.
type Config struct {
	// Issuer is KICI_ORCHESTRATOR_PROVENANCE_ISSUER; "" disables signing.
	Issuer string
	// OrchestratorID names this orchestrator in builder.id and the
	// orchestrator_id claim.
	OrchestratorID string
	// Version is the orchestrator version (builder.version).
	Version string
}

// SubjectInput is one artifact to attest: its name and SHA-256 hex digest,
// as reported by the agent. Nothing else comes from the agent.
type SubjectInput struct {
	Name   string
	SHA256 string
}

// Service signs attestations for running jobs and verifies bundles against
// the live key set.
type Service struct {
	st   store.Store
	keys *Keys
	cfg  Config
	now  func() time.Time
}

// NewService returns a Service over st and keys.
func NewService(st store.Store, keys *Keys, cfg Config) *Service {
	if cfg.OrchestratorID == "" {
		cfg.OrchestratorID = "default"
	}
	return &Service{st: st, keys: keys, cfg: cfg, now: func() time.Time { return time.Now().UTC() }}
}

// Enabled reports whether an issuer is configured.
func (s *Service) Enabled() bool { return s != nil && s.cfg.Issuer != "" }

// Issuer returns the configured issuer.
func (s *Service) Issuer() string { return s.cfg.Issuer }

// Keys returns the key manager.
func (s *Service) Keys() *Keys { return s.keys }

// ValidateSubjects checks subject names (1–1024 bytes, no control
// characters) and digests (SHA-256 hex), 1–MaxSubjects entries, and returns
// them with lowercased digests.
func ValidateSubjects(in []SubjectInput) ([]SubjectInput, error) {
	if len(in) == 0 || len(in) > MaxSubjects {
		return nil, fmt.Errorf("between 1 and %d subjects are required, got %d", MaxSubjects, len(in))
	}
	out := make([]SubjectInput, 0, len(in))
	for i, s := range in {
		if s.Name == "" || len(s.Name) > MaxSubjectNameLen || strings.IndexFunc(s.Name, unicode.IsControl) >= 0 {
			return nil, fmt.Errorf("subject %d: name must be 1–%d bytes without control characters", i, MaxSubjectNameLen)
		}
		d, err := ValidSHA256(s.SHA256)
		if err != nil {
			return nil, fmt.Errorf("subject %d (%s): %v", i, s.Name, err)
		}
		out = append(out, SubjectInput{Name: s.Name, SHA256: d})
	}
	return out, nil
}

// Attest signs one bundle per subject for job jobID of run runID and stores
// them. The statement and the token are built only from the orchestrator's
// run and job rows; the caller (the dispatcher) has already checked that the
// requesting agent currently owns the job. Errors: ErrDisabled,
// ErrJobNotAttestable, invalid subjects, store and key failures.
func (s *Service) Attest(ctx context.Context, runID, jobID string, subjects []SubjectInput) ([]*store.Attestation, error) {
	if !s.Enabled() {
		return nil, ErrDisabled
	}
	subjects, err := ValidateSubjects(subjects)
	if err != nil {
		return nil, err
	}
	job, err := s.st.GetJob(ctx, jobID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, ErrJobNotAttestable
		}
		return nil, err
	}
	if job.RunID != runID || job.Status.IsTerminal() {
		return nil, ErrJobNotAttestable
	}
	run, err := s.st.GetRun(ctx, job.RunID)
	if err != nil {
		return nil, err
	}
	kid, priv, err := s.keys.Active(ctx)
	if err != nil {
		return nil, err
	}
	now := s.now().Truncate(time.Second)
	claims := s.claims(run, job, now)
	token, err := MintToken(priv, kid, claims)
	if err != nil {
		return nil, err
	}
	var out []*store.Attestation
	for _, sub := range subjects {
		st := s.statement(run, job, sub, now)
		b, err := SignStatement(ctx, st, priv, kid, token)
		if err != nil {
			return nil, err
		}
		raw, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		a := &store.Attestation{ID: uuid.NewString(), RunID: run.ID, JobID: job.ID, SubjectName: sub.Name,
			SubjectDigest: "sha256:" + sub.SHA256, Kid: kid, Bundle: raw, CreatedAt: s.now().Truncate(time.Millisecond)}
		if err := s.st.PutAttestation(ctx, a); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// WorkflowRef is the workflow_ref claim and the statement's workflow.path:
// "<workflow name>@<sha>" (KiCI).
func WorkflowRef(run *store.Run) string { return run.WorkflowName + "@" + run.SHA }

// claims builds the identity-token claims from the run and job rows.
func (s *Service) claims(run *store.Run, job *store.Job, now time.Time) *Claims {
	org := run.OrgID
	if org == "" {
		org = "__default__"
	}
	return &Claims{
		Issuer:            s.cfg.Issuer,
		Subject:           fmt.Sprintf("repo:%s:workflow:%s:ref:%s", run.RepoIdentifier, run.WorkflowName, run.Ref),
		Audience:          jwt.Audience{DefaultAudience},
		IssuedAt:          jwt.NewNumericDate(now),
		NotBefore:         jwt.NewNumericDate(now),
		Expiry:            jwt.NewNumericDate(now.Add(TokenTTL)),
		ID:                run.ID + ":" + job.ID,
		RunID:             run.ID,
		JobID:             job.ID,
		Repository:        run.RepoIdentifier,
		Ref:               run.Ref,
		SHA:               run.SHA,
		OrgID:             org,
		Provider:          string(run.Provider),
		OrchestratorID:    s.cfg.OrchestratorID,
		WorkflowRef:       WorkflowRef(run),
		SourceOrigin:      "triggered",
		AttestationOrigin: "live",
	}
}

// BuilderID is "<issuer without trailing slash>/orchestrator/<id>".
func (s *Service) BuilderID() string {
	return strings.TrimRight(s.cfg.Issuer, "/") + "/orchestrator/" + s.cfg.OrchestratorID
}

// statement builds the in-toto/SLSA statement for one subject.
func (s *Service) statement(run *store.Run, job *store.Job, sub SubjectInput, now time.Time) *Statement {
	meta := &BuildMetadata{InvocationID: run.ID + "/" + job.ID}
	if job.StartedAt != nil {
		meta.StartedOn = job.StartedAt.UTC().Format(time.RFC3339)
	}
	var version map[string]string
	if s.cfg.Version != "" {
		version = map[string]string{"kici-orchestrator": s.cfg.Version}
	}
	return &Statement{
		Type:          StatementType,
		Subject:       []Subject{{Name: sub.Name, Digest: map[string]string{"sha256": sub.SHA256}}},
		PredicateType: PredicateTypeSLSA,
		Predicate: SLSAProvenance{
			BuildDefinition: BuildDefinition{
				BuildType: BuildType,
				ExternalParameters: ExternalParameters{Workflow: WorkflowParams{
					Repository: run.RepoIdentifier, Ref: run.Ref, Path: WorkflowRef(run)}},
				InternalParameters: InternalParameters{Commit: run.SHA, RunID: run.ID, JobID: job.ID,
					AttestedOn: now.Format(time.RFC3339)},
			},
			RunDetails: RunDetails{Builder: Builder{ID: s.BuilderID(), Version: version}, Metadata: meta},
		},
	}
}

// Verify checks a bundle against the live key set (rotations and
// revocations take effect at once) with the issuer pinned to the configured
// one. audience "" means DefaultAudience.
func (s *Service) Verify(ctx context.Context, bundle []byte, audience string, digest *Digest) (*Verdict, error) {
	if !s.Enabled() {
		return nil, ErrDisabled
	}
	ks, err := s.keys.KeySet(ctx)
	if err != nil {
		return nil, err
	}
	return Verify(bundle, VerifyOptions{Issuer: s.cfg.Issuer, Audience: audience, Digest: digest, Keys: ks}), nil
}

// OpenIDConfiguration is the OIDC discovery document of the provenance
// issuer (KiCI).
type OpenIDConfiguration struct {
	Issuer                           string   `json:"issuer"`
	JWKSURI                          string   `json:"jwks_uri"`
	IDTokenSigningAlgValuesSupported []string `json:"id_token_signing_alg_values_supported"`
	ResponseTypesSupported           []string `json:"response_types_supported"`
	SubjectTypesSupported            []string `json:"subject_types_supported"`
	ClaimsSupported                  []string `json:"claims_supported"`
}

// Discovery returns the discovery document for issuer.
func Discovery(issuer string) *OpenIDConfiguration {
	return &OpenIDConfiguration{
		Issuer:                           issuer,
		JWKSURI:                          strings.TrimRight(issuer, "/") + "/.well-known/jwks.json",
		IDTokenSigningAlgValuesSupported: []string{Alg},
		ResponseTypesSupported:           []string{"id_token"},
		SubjectTypesSupported:            []string{"public"},
		ClaimsSupported:                  ClaimNames,
	}
}
