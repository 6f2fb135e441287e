package runner

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"kici.dev/kici/internal/agent/logstream"
	"kici.dev/kici/internal/protocol"
)

// Environment variables through which a running step reaches the agent's
// attestation channel (used by `kici-agent attest`).
const (
	// EnvAttestSocket is the unix socket path of the running job's channel.
	EnvAttestSocket = "KICI_ATTEST_SOCKET"
	// EnvAttestToken is the per-job secret every request must carry.
	EnvAttestToken = "KICI_ATTEST_TOKEN"
)

// AttestTimeout bounds one attestation round trip to the orchestrator.
const AttestTimeout = 30 * time.Second

// maxAttestRequest caps a request on the attestation socket.
const maxAttestRequest = 1 << 20

// AttestFunc sends subject names and SHA-256 digests of a running job to
// the orchestrator (provenance.attest) and returns the stored attestations.
type AttestFunc func(ctx context.Context, runID, jobID string, subjects []protocol.AttestSubject) ([]protocol.AttestationRef, error)

// AttestRequest is one request on the attestation socket: the job's token
// and the files to attest (absolute, or relative to the checkout).
type AttestRequest struct {
	Token string   `json:"token"`
	Paths []string `json:"paths"`
}

// AttestResponse answers an AttestRequest.
type AttestResponse struct {
	OK           bool                      `json:"ok"`
	Error        string                    `json:"error,omitempty"`
	Attestations []protocol.AttestationRef `json:"attestations,omitempty"`
}

// attestServer is the per-job attestation channel: a unix socket in a fresh
// 0700 directory, alive only while the job runs, accepting requests that
// carry the job's random token. It can only ever attest for its own job, and
// only files inside the job's checkout.
type attestServer struct {
	j     *job
	dir   string
	path  string
	token string
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]bool // open connections, closed by stopAttest
	done  bool              // stopAttest ran
}

// startAttest opens the job's attestation channel when the runner can
// attest (Options.Attest set). Failure to open it only disables the channel.
func (j *job) startAttest() {
	if j.r.opts.Attest == nil {
		return
	}
	// A short path under the system temp dir keeps within the unix socket
	// path limit (~104 bytes) whatever WorkRoot is.
	dir, err := os.MkdirTemp("", "kici-attest-")
	if err != nil {
		j.r.opts.Logger.Warn("attestation channel unavailable", "err", err)
		return
	}
	tok := make([]byte, 32)
	_, _ = rand.Read(tok)
	s := &attestServer{j: j, dir: dir, path: filepath.Join(dir, "s"), token: hex.EncodeToString(tok), conns: map[net.Conn]bool{}}
	ln, err := net.Listen("unix", s.path)
	if err != nil {
		os.RemoveAll(dir)
		j.r.opts.Logger.Warn("attestation channel unavailable", "err", err)
		return
	}
	if err := j.handOver(dir); err != nil { // the step user must reach it
		ln.Close()
		os.RemoveAll(dir)
		j.r.opts.Logger.Warn("attestation channel unavailable", "err", err)
		return
	}
	s.ln = ln
	j.attest = s
	s.wg.Add(1)
	go s.serve()
}

// stopAttest closes the channel (listener and any connection a leftover
// process still holds) and removes its directory.
func (j *job) stopAttest() {
	s := j.attest
	if s == nil {
		return
	}
	s.ln.Close()
	s.mu.Lock()
	s.done = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	os.RemoveAll(s.dir)
}

// attestEnv adds the channel's variables to a step's extra environment.
func (j *job) attestEnv(extra map[string]string) map[string]string {
	if j.attest != nil {
		extra[EnvAttestSocket] = j.attest.path
		extra[EnvAttestToken] = j.attest.token
	}
	return extra
}

func (s *attestServer) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.done {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
			_ = c.SetDeadline(time.Now().Add(AttestTimeout + 10*time.Second))
			resp := s.handle(c)
			_ = json.NewEncoder(c).Encode(resp)
		}()
	}
}

func (s *attestServer) handle(c net.Conn) AttestResponse {
	line, err := bufio.NewReader(io.LimitReader(c, maxAttestRequest)).ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return AttestResponse{Error: "reading request: " + err.Error()}
	}
	var req AttestRequest
	if err := json.Unmarshal(line, &req); err != nil {
		return AttestResponse{Error: "invalid request"}
	}
	if subtle.ConstantTimeCompare([]byte(req.Token), []byte(s.token)) != 1 {
		return AttestResponse{Error: "invalid attestation token"}
	}
	refs, err := s.j.attestFiles(req.Paths)
	if err != nil {
		return AttestResponse{Error: err.Error()}
	}
	return AttestResponse{OK: true, Attestations: refs}
}

// attestFiles hashes files inside the checkout and asks the orchestrator to
// attest them. Paths may be absolute or relative to the checkout; after
// resolving symlinks each must be a regular file inside the checkout.
// Subject names are the slash-separated paths relative to the checkout.
func (j *job) attestFiles(paths []string) ([]protocol.AttestationRef, error) {
	if len(paths) == 0 {
		return nil, errors.New("no files to attest")
	}
	root, err := filepath.EvalSymlinks(j.srcDir)
	if err != nil {
		return nil, err
	}
	var subjects []protocol.AttestSubject
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			p = filepath.Join(j.srcDir, p)
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, fmt.Errorf("attest %s: %w", p, err)
		}
		rel, err := filepath.Rel(root, real)
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil, fmt.Errorf("attest %s: only files inside the checkout can be attested", p)
		}
		sum, err := hashFile(real)
		if err != nil {
			return nil, fmt.Errorf("attest %s: %w", p, err)
		}
		subjects = append(subjects, protocol.AttestSubject{Name: filepath.ToSlash(rel), Digest: map[string]string{"sha256": sum}})
	}
	ctx, cancel := context.WithTimeout(j.ctx, AttestTimeout)
	defer cancel()
	return j.r.opts.Attest(ctx, j.d.RunID, j.d.JobID, subjects)
}

func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", errors.New("not a regular file")
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// attestDeclared attests the files a successful step declares in `attest:`
// (relative to the checkout) and logs the result. An error fails the step.
func (j *job) attestDeclared(i int, log *logstream.Stream) error {
	paths := j.cfg.Steps[i].Attest
	if len(paths) == 0 {
		return nil
	}
	if j.r.opts.Attest == nil {
		err := errors.New("attestation is not available on this agent")
		log.AddLine("", "Error: "+err.Error())
		return err
	}
	for _, p := range paths {
		if filepath.IsAbs(p) {
			return fmt.Errorf("attest path %q must be relative to the checkout", p)
		}
	}
	refs, err := j.attestFiles(paths)
	if err != nil {
		err = fmt.Errorf("attestation failed: %w", err)
		log.AddLine("", "Error: "+err.Error())
		return err
	}
	for _, r := range refs {
		log.AddLine("", fmt.Sprintf("Attested %s %s (attestation %s)", r.SubjectName, r.SubjectDigest, r.ID))
	}
	return nil
}
