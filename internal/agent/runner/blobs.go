package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/agent/logstream"
	"kici.dev/kici/internal/agent/transfer"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/protocol"
)

// BlobOptions configures job caches, artifacts and the job HOME.
type BlobOptions struct {
	// BaseURL is the orchestrator's HTTP base for the job blob routes;
	// "" disables `cache:`, `artifacts:` and `download:` (they are then
	// logged as skipped; a `download:` fails the job).
	BaseURL string
	// CurrentBaseURL, when set, is asked for the base at the start of each
	// job instead of BaseURL: the HTTP base of the orchestrator the agent
	// is connected to now (it moves between the nodes of a cluster).
	CurrentBaseURL func() string
	// HTTP is the client for those routes (http.DefaultClient when nil).
	HTTP *http.Client
	// JobHome gives every job a fresh, empty HOME inside its work
	// directory (removed with it) instead of the agent's, and drops the
	// host's GOPATH, GOCACHE and GOMODCACHE, so nothing one job leaves in
	// a home directory reaches the next: state carries over only through
	// declared caches, which the orchestrator scopes and keeps fork jobs
	// from writing.
	JobHome bool
}

// DefaultTransferTimeout bounds one cache or artifact transfer.
const DefaultTransferTimeout = 30 * time.Minute

// blobState is what beforeSteps learned for afterSteps.
type blobState struct {
	client *transfer.Client
	home   string
	caches []cacheState
}

type cacheState struct {
	spec  lockfile.Cache
	key   string // expanded
	roots []transfer.Root
	exact bool // restored the exact key: nothing to save
	bad   bool // key could not be expanded: neither restored nor saved
}

// setupHome prepares the step host environment: with JobHome, HOME is
// <work>/home (created 0700) and the host's Go cache locations are
// dropped so Go uses the job HOME's defaults.
func (j *job) setupHome() error {
	j.hostEnv = j.r.opts.HostEnv
	j.ident.Tmp = j.tmpDir
	if !j.ownHome() {
		return nil
	}
	// Made by the agent inside the job's own work directory, which no
	// other job can enter, and handed to the job's uid with the checkout:
	// nothing can slip in between creating and handing over.
	home := filepath.Join(j.workDir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return err
	}
	j.ident.Home = home
	env := make([]string, 0, len(j.hostEnv)+1)
	for _, kv := range j.hostEnv {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOME", "GOPATH", "GOCACHE", "GOMODCACHE", "XDG_CACHE_HOME":
			continue
		}
		env = append(env, kv)
	}
	j.hostEnv = append(env, "HOME="+home)
	return nil
}

// homeDir is the HOME the job's steps see.
func (j *job) homeDir() string {
	return lookupEnv(j.hostEnv, "HOME")
}

// beforeSteps restores the job's caches and downloads the artifacts it
// declares. A cache problem is logged and the job goes on cold; a missing
// artifact fails the job (its steps expect the files).
func (j *job) beforeSteps(log *logstream.Stream) (*blobState, error) {
	bs := &blobState{home: j.homeDir()}
	start := j.startContainers // jobcontainer.go
	if j.r.opts.InPod {
		start = j.startPodContainer // podcontainer.go
	}
	if err := start(log); err != nil {
		return bs, err
	}
	if len(j.cfg.Cache) == 0 && len(j.cfg.Artifacts) == 0 && len(j.cfg.Download) == 0 {
		return bs, nil
	}
	base := j.r.opts.Blobs.BaseURL
	if f := j.r.opts.Blobs.CurrentBaseURL; f != nil {
		base = f()
	}
	if base == "" || j.d.JobCredential == "" {
		log.AddLine("", "Caches and artifacts are not available on this agent (no orchestrator blob endpoint or job credential)")
		if len(j.cfg.Download) > 0 {
			return bs, errors.New("artifacts to download, but this agent cannot reach the orchestrator's artifact routes")
		}
		return bs, nil
	}
	bs.client = &transfer.Client{BaseURL: base, JobID: j.d.JobID, Credential: j.d.JobCredential, HTTP: j.r.opts.Blobs.HTTP}
	for _, c := range j.cfg.Cache {
		bs.caches = append(bs.caches, j.restoreCache(bs, c, log))
	}
	for _, name := range j.cfg.Download {
		if err := j.downloadArtifact(bs, name, log); err != nil {
			return bs, fmt.Errorf("artifact %q: %w", name, err)
		}
	}
	return bs, nil
}

func (j *job) transferCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(j.ctx, DefaultTransferTimeout)
}

// cacheRoots resolves a cache's paths in the job (jobIdentity.cacheRoot):
// a relative path is in the workspace, "~/…" in the job's HOME, "/tmp/…"
// in its private temporary directory; none needs to exist yet (a
// directory a step creates, like node_modules, is created on restore and
// saved after the steps).
func (j *job) cacheRoots(paths []string) ([]transfer.Root, error) {
	id := j.identity()
	var out []transfer.Root
	for _, p := range paths {
		r, err := id.cacheRoot(p)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// expandKey fills a cache key template for this job.
func (j *job) expandKey(tmpl string) (string, error) {
	return lockfile.ExpandCacheKey(tmpl, func(fn string, args []string) (string, error) {
		switch fn {
		case "os":
			return runtime.GOOS, nil
		case "arch":
			return runtime.GOARCH, nil
		case "matrix":
			v, ok := j.d.MatrixValues[args[0]]
			if !ok {
				return "", fmt.Errorf("matrix.%s: the job has no such matrix value", args[0])
			}
			return v, nil
		}
		return hashFiles(j.srcDir, args)
	})
}

// hashFiles is the SHA-256 over the sorted workspace files matching globs
// (each contributing its path and the SHA-256 of its content); "" when
// nothing matches, like GitHub's hashFiles.
func hashFiles(root string, globs []string) (string, error) {
	files, err := transfer.MatchFiles(root, globs)
	if err != nil || len(files) == 0 {
		return "", err
	}
	h := sha256.New()
	for _, f := range files {
		fh := sha256.New()
		r, err := transfer.OpenNoFollow(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return "", err
		}
		_, err = io.Copy(fh, r)
		r.Close()
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%x\n", f, fh.Sum(nil))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (j *job) restoreCache(bs *blobState, c lockfile.Cache, log *logstream.Stream) cacheState {
	cs := cacheState{spec: c}
	key, err := j.expandKey(c.Key)
	var restore []string
	for _, rk := range c.RestoreKeys {
		if err != nil {
			break
		}
		var k string
		if k, err = j.expandKey(rk); err == nil {
			restore = append(restore, k)
		}
	}
	shown := c.Key // the template, when it could not be rendered
	if err == nil {
		shown = key
		cs.roots, err = j.cacheRoots(c.Paths)
	}
	if err != nil {
		log.AddLine("", fmt.Sprintf("Cache %s: %s; not restored or saved", shown, err))
		cs.bad = true
		return cs
	}
	cs.key = key
	start := time.Now()
	ctx, cancel := j.transferCtx()
	defer cancel()
	dl, err := bs.client.RestoreCache(ctx, key, restore)
	if errors.Is(err, transfer.ErrMiss) {
		log.AddLine("", fmt.Sprintf("Cache miss for %s", key))
		return cs
	}
	if err != nil {
		log.AddLine("", fmt.Sprintf("Cache %s could not be restored: %s", key, err))
		return cs
	}
	defer dl.Body.Close()
	st, created, err := j.unpackAs(ctx, dl.Body, cs.roots)
	if err == nil {
		_, _ = io.Copy(io.Discard, dl.Body)
		err = dl.Verify()
	}
	if err != nil {
		j.undoAs(created)
		log.AddLine("", fmt.Sprintf("Cache %s could not be restored: %s (the job continues without it)", dl.Key, err))
		return cs
	}
	cs.exact = dl.Exact
	how := "restored"
	if dl.Key != key {
		how = "restored from restore key match " + dl.Key
	}
	log.AddLine("", fmt.Sprintf("Cache %s %s: %d files, %s in %s", key, how, st.Files, humanBytes(st.Bytes), time.Since(start).Round(time.Millisecond)))
	return cs
}

func (j *job) downloadArtifact(bs *blobState, name string, log *logstream.Stream) error {
	start := time.Now()
	ctx, cancel := j.transferCtx()
	defer cancel()
	dl, err := bs.client.DownloadArtifact(ctx, name)
	if err != nil {
		return err
	}
	defer dl.Body.Close()
	st, created, err := j.unpackAs(ctx, dl.Body, []transfer.Root{{Dir: j.srcDir, Base: j.srcDir}})
	if err == nil {
		_, _ = io.Copy(io.Discard, dl.Body)
		err = dl.Verify()
	}
	if err != nil {
		j.undoAs(created)
		return err
	}
	log.AddLine("", fmt.Sprintf("Artifact %s downloaded (sha256 %s): %d files, %s in %s", name, dl.SHA256, st.Files, humanBytes(st.Bytes), time.Since(start).Round(time.Millisecond)))
	return nil
}

// afterSteps uploads the artifacts whose `when` includes the job's outcome
// and, when the job succeeded, saves the caches that were not restored by
// their exact key. Failures are logged; an artifact that cannot be stored
// fails the job (its dependents would miss it), a cache never does.
func (j *job) afterSteps(bs *blobState, outcome status.Job) error {
	if bs == nil || bs.client == nil || j.isForced() {
		return nil
	}
	log := j.newStream(JobLogStep)
	defer log.Close()
	var failed error
	for _, a := range j.cfg.Artifacts {
		when := a.When
		if len(when) == 0 {
			when = []status.Job{status.JobSuccess}
		}
		if !slices.Contains(when, outcome) {
			continue
		}
		if err := j.uploadArtifact(bs, a, log); err != nil {
			log.AddLine("", fmt.Sprintf("Error: artifact %s was not stored: %s", a.Name, err))
			if failed == nil {
				failed = fmt.Errorf("artifact %q was not stored: %w", a.Name, err)
			}
		}
	}
	if outcome != status.JobSuccess {
		return failed
	}
	for _, cs := range bs.caches {
		if cs.bad || cs.exact {
			continue
		}
		j.saveCache(bs, cs, log)
	}
	return failed
}

func (j *job) isForced() bool {
	j.stopMu.Lock()
	defer j.stopMu.Unlock()
	return j.forced
}

func (j *job) uploadArtifact(bs *blobState, a lockfile.Artifact, log *logstream.Stream) error {
	files, err := transfer.MatchFiles(j.srcDir, a.Paths)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no file matches %s", strings.Join(a.Paths, ", "))
	}
	start := time.Now()
	up, st, err := j.streamUp(func(ctx context.Context, r io.Reader) (transfer.Uploaded, error) {
		return bs.client.UploadArtifact(ctx, a.Name, r)
	}, []transfer.Root{{Dir: j.srcDir, Files: files, Base: j.srcDir}})
	if err != nil {
		return err
	}
	log.AddLine("", fmt.Sprintf("Artifact %s uploaded: %d files, %s compressed, sha256 %s, in %s", a.Name, st.Files, humanBytes(up.SizeBytes), up.SHA256, time.Since(start).Round(time.Millisecond)))
	if a.Attest {
		return j.attestArtifact(a.Name, up.SHA256, log)
	}
	return nil
}

// attestArtifact asks the orchestrator for a provenance attestation whose
// subject is the artifact (name "artifact:<name>", the digest of its
// stored archive, which the orchestrator checks against its record).
func (j *job) attestArtifact(name, sha string, log *logstream.Stream) error {
	if j.r.opts.Attest == nil {
		return errors.New("attest: provenance is not available on this agent")
	}
	ctx, cancel := context.WithTimeout(j.ctx, AttestTimeout)
	defer cancel()
	refs, err := j.r.opts.Attest(ctx, j.d.RunID, j.d.JobID, []protocol.AttestSubject{{Name: ArtifactSubjectPrefix + name, Digest: map[string]string{"sha256": sha}}})
	if err != nil {
		return fmt.Errorf("attest: %w", err)
	}
	for _, ref := range refs {
		log.AddLine("", fmt.Sprintf("Artifact %s attested: %s", name, ref.ID))
	}
	return nil
}

// ArtifactSubjectPrefix starts the provenance subject name of an artifact.
const ArtifactSubjectPrefix = "artifact:"

func (j *job) saveCache(bs *blobState, cs cacheState, log *logstream.Stream) {
	if !anyExists(cs.roots) {
		// An empty entry under the exact key would be restored by every
		// later run, which then never saves the real content.
		log.AddLine("", fmt.Sprintf("Cache %s not saved: none of its paths exist (%s)", cs.key, strings.Join(cs.spec.Paths, ", ")))
		return
	}
	start := time.Now()
	up, st, err := j.streamUp(func(ctx context.Context, r io.Reader) (transfer.Uploaded, error) {
		return bs.client.SaveCache(ctx, cs.key, r)
	}, cs.roots)
	var se *transfer.StatusError
	switch {
	case errors.As(err, &se) && se.Code == http.StatusConflict:
		log.AddLine("", fmt.Sprintf("Cache %s already saved by another job", cs.key))
	case errors.As(err, &se) && se.Code == http.StatusForbidden:
		log.AddLine("", fmt.Sprintf("Cache %s not saved: %s", cs.key, se.Msg))
	case err != nil:
		log.AddLine("", fmt.Sprintf("Cache %s could not be saved: %s", cs.key, err))
	default:
		log.AddLine("", fmt.Sprintf("Cache %s saved: %d files, %s compressed, in %s", cs.key, st.Files, humanBytes(up.SizeBytes), time.Since(start).Round(time.Millisecond)))
	}
}

// anyExists reports whether one of roots is on disk (Lstat: nothing is
// read or followed).
func anyExists(roots []transfer.Root) bool {
	for _, r := range roots {
		if _, err := os.Lstat(r.Dir); err == nil {
			return true
		}
	}
	return false
}

// streamUp packs roots (with the job's credentials, packAs) into a pipe
// read by send, so nothing is staged on disk or held whole in memory.
func (j *job) streamUp(send func(context.Context, io.Reader) (transfer.Uploaded, error), roots []transfer.Root) (transfer.Uploaded, transfer.Stats, error) {
	ctx, cancel := j.transferCtx()
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan transfer.Stats, 1)
	go func() {
		st, err := j.packAs(ctx, pw, roots)
		pw.CloseWithError(err)
		done <- st
	}()
	up, err := send(ctx, pr)
	pr.CloseWithError(errors.New("upload ended"))
	st := <-done
	return up, st, err
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// outcome is the job status the artifacts' `when` is matched against.
func (j *job) outcome(failure string) status.Job {
	switch j.stoppedKind() {
	case stopCancel:
		return status.JobCancelled
	case stopTimeout:
		return status.JobFailed
	}
	if failure != "" {
		return status.JobFailed
	}
	return status.JobSuccess
}
