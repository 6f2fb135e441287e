package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"kici.dev/kici/internal/blobstore"
	"kici.dev/kici/internal/jobblobs"
	"kici.dev/kici/internal/provenance"
	"kici.dev/kici/internal/secrets/masterkey"
	"kici.dev/kici/internal/store"
)

// localStateDir is where `kici run local` keeps what outlives one run: the
// run database (with the cache index) and the cache and artifact blobs,
// in the repository's git directory (never part of the working tree or a
// commit): <git-common-dir>/kici-local. Removing it forgets every local
// cache.
func localStateDir(root string) (string, error) {
	gitDir, err := gitOut(root, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return "", err
	}
	dir := filepath.Join(gitDir, "kici-local")
	return dir, os.MkdirAll(dir, 0o700)
}

// localBlobs serves the orchestrator's own cache and artifact routes
// (jobblobs) to the in-process runner of `kici run local`, on a loopback
// port, over the local run database and a blob directory: caches are
// restored and saved, artifacts uploaded and downloaded by dependent jobs,
// with the same scoping, checks and job credentials as on the server.
type localBlobs struct {
	svc *jobblobs.Service
	srv *http.Server
	url string
}

func startLocalBlobs(st store.Store, dir string) (*localBlobs, error) {
	bs, err := blobstore.NewDir(filepath.Join(dir, "blobs"))
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	lb := &localBlobs{svc: jobblobs.New(st, bs, nil, nil), url: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	lb.svc.Mount(mux, nil)
	lb.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := lb.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			ln.Close()
		}
	}()
	return lb, nil
}

// credential mints the job credential of a job about to run.
func (lb *localBlobs) credential(ctx context.Context, jobID string) (string, error) {
	return lb.svc.IssueCredential(ctx, jobID)
}

func (lb *localBlobs) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = lb.srv.Shutdown(ctx)
}

// localIssuer names the signer of `kici run local` attestations. It is not
// a URL anyone serves: local attestations are for trying a workflow out,
// signed with a key kept in the repository's kici-local directory.
const localIssuer = "kici-run-local"

// localProvenance is the provenance signer of `kici run local`, over the
// local run database, with a master key of its own (secret.key in dir,
// created 0600 on first use; the operator's KICI_SECRET_KEY is not read),
// so `attest: true` works locally as it does on the embedded default.
func localProvenance(ctx context.Context, st store.Store, dir string) (*provenance.Service, error) {
	mk, err := masterkey.Load(dir, func(string) string { return "" })
	if err != nil {
		return nil, fmt.Errorf("run local: provenance key: %w", err)
	}
	keys := provenance.NewKeys(st, mk)
	if _, _, err := keys.Active(ctx); err != nil {
		return nil, fmt.Errorf("run local: provenance key: %w", err)
	}
	return provenance.NewService(st, keys, provenance.Config{Issuer: localIssuer, OrchestratorID: "local", Version: version}), nil
}
