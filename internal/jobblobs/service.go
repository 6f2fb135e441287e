// Package jobblobs is the orchestrator side of job caches and artifacts:
// which job may read or write which object, the quotas and lifetimes of
// the cluster settings (userCacheQuotaBytes, userCacheTtlMs,
// artifactQuotaBytes, artifactTtlMs, artifactMaxBytes, artifactMaxPerRun),
// and the HTTP routes agents stream them through with their job
// credential. The bytes live in a blobstore.Store; the index in the store.
//
// Caches are scoped per source and branch. A job reads its own branch's
// caches, then its pull request's base branch's, then the default
// branch's; it writes only its own branch's, and a job of a fork pull
// request (trust tier unknown) never writes at all, so untrusted code
// cannot plant a cache that a trusted job later restores.
package jobblobs

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/blobstore"
	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/store"
)

// Settings reads the live cluster settings (cluster.Reader).
type Settings interface {
	Int(ctx context.Context, name string) int64
}

// Service implements cache and artifact access. Safe for concurrent use.
type Service struct {
	st    store.Store
	blobs blobstore.Store
	set   Settings
	log   *slog.Logger
	now   func() time.Time
}

// New returns a Service. settings nil means the built-in defaults.
func New(st store.Store, blobs blobstore.Store, settings Settings, logger *slog.Logger) *Service {
	if settings == nil {
		settings = defaults{}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Service{st: st, blobs: blobs, set: settings, log: logger, now: time.Now}
}

type defaults struct{}

func (defaults) Int(_ context.Context, name string) int64 { return cluster.DefaultValues()[name] }

// Errors the routes map to HTTP statuses.
var (
	// ErrForbidden: the job may not do this (a fork job saving a cache, an
	// undeclared artifact, a foreign job id).
	ErrForbidden = errors.New("forbidden")
	// ErrExists: the cache key or artifact name is already taken.
	ErrExists = errors.New("already exists")
	// ErrMiss: no cache or artifact matches (it wraps store.ErrNotFound).
	ErrMiss = fmt.Errorf("not found (%w)", store.ErrNotFound)
	// ErrUnauthorized: no valid job credential.
	ErrUnauthorized = errors.New("unauthorized")
)

// CredentialPrefix starts every job credential.
const CredentialPrefix = "kjc_"

// IssueCredential mints the credential of jobID's current dispatch and
// records its hash; a redispatch replaces it, so only the agent running
// the job now holds a valid one. The credential travels in job.dispatch
// (masked in logs) and is presented as "Authorization: Bearer …".
func (s *Service) IssueCredential(ctx context.Context, jobID string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	tok := CredentialPrefix + base64.RawURLEncoding.EncodeToString(b)
	if err := s.st.SetJobCredential(ctx, jobID, hashToken(tok)); err != nil {
		return "", err
	}
	return tok, nil
}

func hashToken(t string) string {
	h := sha256.Sum256([]byte(t))
	return hex.EncodeToString(h[:])
}

// jobCtx is an authenticated job with its run and lock entry.
type jobCtx struct {
	job *store.Job
	run *store.Run
	cfg lockfile.Job
}

// Authenticate resolves a bearer credential to its job, which must be
// jobID and still running (a credential dies with its job: terminal
// statuses are refused).
func (s *Service) authenticate(ctx context.Context, token, jobID string) (*jobCtx, error) {
	if !strings.HasPrefix(token, CredentialPrefix) {
		return nil, ErrUnauthorized
	}
	id, err := s.st.JobForCredential(ctx, hashToken(token))
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrUnauthorized
	}
	if err != nil {
		return nil, err
	}
	if id != jobID {
		return nil, fmt.Errorf("%w: the credential belongs to another job", ErrForbidden)
	}
	job, err := s.st.GetJob(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrUnauthorized
	}
	if err != nil {
		return nil, err
	}
	if job.Status.IsTerminal() {
		return nil, fmt.Errorf("%w: job is %s", ErrUnauthorized, job.Status)
	}
	run, err := s.st.GetRun(ctx, job.RunID)
	if err != nil {
		return nil, err
	}
	jc := &jobCtx{job: job, run: run}
	if len(job.Config) > 0 {
		if err := json.Unmarshal(job.Config, &jc.cfg); err != nil {
			return nil, fmt.Errorf("job config: %w", err)
		}
	}
	return jc, nil
}

// branchOf turns a ref into the branch part of a cache scope:
// refs/heads/x → x; anything else (tags, pull request refs) stays whole.
func branchOf(ref string) string {
	if b, ok := strings.CutPrefix(ref, "refs/heads/"); ok {
		return b
	}
	return ref
}

// scopeOf is "<source or repository>@<branch>".
func scopeOf(run *store.Run, branch string) string {
	owner := run.SourceID
	if owner == "" {
		owner = run.RepoIdentifier
	}
	return owner + "@" + branch
}

// readScopes lists, in order, the scopes a job may restore from: its own
// ref, its pull request's base branch, the repository's default branch.
func (s *Service) readScopes(ctx context.Context, run *store.Run) []string {
	out := []string{scopeOf(run, branchOf(run.Ref))}
	add := func(b string) {
		if b == "" {
			return
		}
		sc := scopeOf(run, b)
		for _, o := range out {
			if o == sc {
				return
			}
		}
		out = append(out, sc)
	}
	add(run.TargetBranch)
	add(s.defaultBranch(ctx, run))
	return out
}

// defaultBranch is the repository's default branch as the forge reported
// it in the run's delivery (repository.default_branch, GitLab's
// project.default_branch), else "main".
func (s *Service) defaultBranch(ctx context.Context, run *store.Run) string {
	if run.DeliveryID != "" {
		if d, err := s.st.GetDelivery(ctx, run.DeliveryID); err == nil {
			var p struct {
				Repository struct {
					DefaultBranch string `json:"default_branch"`
				} `json:"repository"`
				Project struct {
					DefaultBranch string `json:"default_branch"`
				} `json:"project"`
			}
			if json.Unmarshal(d.Payload, &p) == nil {
				if b := p.Repository.DefaultBranch; b != "" {
					return b
				}
				if b := p.Project.DefaultBranch; b != "" {
					return b
				}
			}
		}
	}
	return "main"
}

// CacheHit is a restored cache: read Body to its end (the final Read
// checks the recorded digest), then Close it.
type CacheHit struct {
	Entry *store.CacheEntry
	// Exact is true when Entry.Key is the requested key (no save needed).
	Exact bool
	Body  io.ReadCloser
}

// RestoreCache finds the cache for key, else the newest entry whose key
// starts with one of restoreKeys, searching the job's read scopes in order
// (each scope: the key, then the restore keys). Entries unused for longer
// than userCacheTtlMs are expired on the way. ErrMiss when nothing matches.
func (s *Service) RestoreCache(ctx context.Context, jc *jobCtx, key string, restoreKeys []string) (*CacheHit, error) {
	ttl := time.Duration(s.set.Int(ctx, cluster.UserCacheTTLMs)) * time.Millisecond
	for _, scope := range s.readScopes(ctx, jc.run) {
		for i, k := range append([]string{key}, restoreKeys...) {
			e, err := s.st.FindCacheEntry(ctx, jc.run.OrgID, scope, k, i > 0)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if ttl > 0 && s.now().Sub(e.LastUsedAt) > ttl {
				s.dropCache(ctx, e, "expired")
				continue
			}
			body, err := s.blobs.Open(ctx, e.BlobKey, e.SHA256)
			if errors.Is(err, blobstore.ErrNotFound) {
				s.dropCache(ctx, e, "blob missing")
				continue
			}
			if err != nil {
				return nil, err
			}
			if err := s.st.TouchCacheEntry(ctx, e.ID, s.now()); err != nil {
				s.log.Warn("cache touch failed", "id", e.ID, "err", err)
			}
			return &CacheHit{Entry: e, Exact: i == 0 && scope == scopeOf(jc.run, branchOf(jc.run.Ref)), Body: body}, nil
		}
	}
	return nil, ErrMiss
}

// SaveCache stores body as the cache key of the job's own scope. A fork
// pull request's job is refused (ErrForbidden); a key already saved is
// immutable (ErrExists). The body is cut at userCacheQuotaBytes
// (blobstore.ErrTooLarge); after the save the org's least recently used
// caches are evicted until the org is within its quota again.
func (s *Service) SaveCache(ctx context.Context, jc *jobCtx, key string, body io.Reader) (*store.CacheEntry, error) {
	if jc.run.TrustTier == store.TrustUnknown {
		return nil, fmt.Errorf("%w: a fork pull request's job may restore caches but never save them", ErrForbidden)
	}
	if err := checkCacheKey(key); err != nil {
		return nil, err
	}
	scope := scopeOf(jc.run, branchOf(jc.run.Ref))
	if _, err := s.st.FindCacheEntry(ctx, jc.run.OrgID, scope, key, false); err == nil {
		return nil, fmt.Errorf("%w: cache %q is already saved for %s", ErrExists, key, scope)
	}
	quota := s.set.Int(ctx, cluster.UserCacheQuotaBytes)
	id := uuid.NewString()
	blobKey := "caches/" + safeSegment(jc.run.OrgID) + "/" + id
	info, err := s.blobs.Put(ctx, blobKey, body, quota)
	if err != nil {
		return nil, err
	}
	e := &store.CacheEntry{ID: id, OrgID: jc.run.OrgID, Scope: scope, Key: key, BlobKey: blobKey,
		SizeBytes: info.Size, SHA256: info.SHA256, JobID: jc.job.ID, CreatedAt: s.now()}
	if err := s.st.InsertCacheEntry(ctx, e); err != nil {
		_ = s.blobs.Delete(context.WithoutCancel(ctx), blobKey)
		if errors.Is(err, store.ErrConflict) {
			return nil, fmt.Errorf("%w: cache %q was saved concurrently", ErrExists, key)
		}
		return nil, err
	}
	s.evictCaches(ctx, jc.run.OrgID, quota, e.ID)
	return e, nil
}

// evictCaches deletes the org's expired caches, then its least recently
// used ones (never keep) until they total at most quota bytes.
func (s *Service) evictCaches(ctx context.Context, orgID string, quota int64, keep string) {
	list, err := s.st.ListCacheEntries(ctx, orgID)
	if err != nil {
		s.log.Warn("cache eviction: list failed", "org", orgID, "err", err)
		return
	}
	ttl := time.Duration(s.set.Int(ctx, cluster.UserCacheTTLMs)) * time.Millisecond
	var total int64
	var live []*store.CacheEntry
	for _, e := range list {
		if ttl > 0 && s.now().Sub(e.LastUsedAt) > ttl && e.ID != keep {
			s.dropCache(ctx, e, "expired")
			continue
		}
		total += e.SizeBytes
		live = append(live, e)
	}
	for _, e := range live {
		if total <= quota {
			break
		}
		if e.ID == keep {
			continue
		}
		s.dropCache(ctx, e, "quota")
		total -= e.SizeBytes
	}
}

func (s *Service) dropCache(ctx context.Context, e *store.CacheEntry, why string) {
	ctx = context.WithoutCancel(ctx)
	if err := s.st.DeleteCacheEntry(ctx, e.ID); err != nil {
		s.log.Warn("cache delete failed", "id", e.ID, "err", err)
		return
	}
	if err := s.blobs.Delete(ctx, e.BlobKey); err != nil {
		s.log.Warn("cache blob delete failed", "key", e.BlobKey, "err", err)
	}
	s.log.Info("cache evicted", "org", e.OrgID, "scope", e.Scope, "key", e.Key, "reason", why)
}

// MaxCacheKeyLen bounds an expanded cache key.
const MaxCacheKeyLen = 512

func checkCacheKey(k string) error {
	if k == "" || len(k) > MaxCacheKeyLen {
		return fmt.Errorf("%w: a cache key must be 1 to %d bytes", ErrForbidden, MaxCacheKeyLen)
	}
	for _, c := range k {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: a cache key must not contain control characters", ErrForbidden)
		}
	}
	return nil
}

// safeSegment keeps a blob key segment within the blob key alphabet.
func safeSegment(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) == 0 || string(b) == "." || string(b) == ".." {
		return "_"
	}
	return string(b)
}
