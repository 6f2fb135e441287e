package jobblobs_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/blobstore"
	"kici.dev/kici/internal/blobstore/blobtest"
	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/jobblobs"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/teststore"
	"kici.dev/kici/internal/testutil/wait"
)

// settings is a mutable cluster.Settings.
type settings struct {
	mu sync.Mutex
	m  map[string]int64
}

func (s *settings) Int(_ context.Context, name string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[name]; ok {
		return v
	}
	return cluster.DefaultValues()[name]
}

func (s *settings) set(name string, v int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[name] = v
}

type fixture struct {
	t   *testing.T
	st  store.Store
	svc *jobblobs.Service
	set *settings
	url string
	n   int
}

func newFixture(t *testing.T, blobs blobstore.Store) *fixture {
	st := teststore.SQLite(t)
	set := &settings{m: map[string]int64{}}
	svc := jobblobs.New(st, blobs, set, nil)
	mux := http.NewServeMux()
	svc.Mount(mux, nil)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &fixture{t: t, st: st, svc: svc, set: set, url: srv.URL}
}

// job creates a running job of a new run on ref with trust tier, and returns
// its id and credential.
func (f *fixture) job(ref, target, trust string, cfg lockfile.Job) (runID, jobID, tok string) {
	f.t.Helper()
	runID, ids, toks := f.run(ref, target, trust, cfg)
	return runID, ids[0], toks[0]
}

// run creates a running run with one running job per cfg and returns the
// job ids and credentials.
func (f *fixture) run(ref, target, trust string, cfgs ...lockfile.Job) (runID string, ids, toks []string) {
	f.t.Helper()
	f.n++
	runID = fmt.Sprintf("r%d", f.n)
	var jobs []*store.Job
	for i, cfg := range cfgs {
		b, _ := json.Marshal(cfg)
		id := fmt.Sprintf("%s-j%d", runID, i)
		ids = append(ids, id)
		jobs = append(jobs, &store.Job{ID: id, RunID: runID, JobName: cfg.Name, BaseJobName: cfg.Name, Status: status.JobRunning, Config: b})
	}
	err := f.st.CreateRun(context.Background(), &store.Run{ID: runID, WorkflowName: "w", Status: status.RunRunning, Provider: "local",
		RepoIdentifier: "acme/app", SourceID: "src1", OrgID: "o1", Ref: ref, TargetBranch: target, TrustTier: trust,
		SHA: strings.Repeat("a", 40), CreatedAt: time.Now()}, jobs)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, id := range ids {
		tok, err := f.svc.IssueCredential(context.Background(), id)
		if err != nil {
			f.t.Fatal(err)
		}
		toks = append(toks, tok)
	}
	return runID, ids, toks
}

func (f *fixture) do(method, path, tok string, body io.Reader) (*http.Response, []byte) {
	f.t.Helper()
	req, _ := http.NewRequest(method, f.url+path, body)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func (f *fixture) save(jobID, tok, key string, body []byte) int {
	resp, _ := f.do("PUT", "/api/v1/jobs/"+jobID+"/cache?key="+key, tok, bytes.NewReader(body))
	return resp.StatusCode
}

func (f *fixture) restore(jobID, tok, key string, restore ...string) (int, string, []byte) {
	q := "key=" + key
	for _, r := range restore {
		q += "&restoreKey=" + r
	}
	resp, b := f.do("GET", "/api/v1/jobs/"+jobID+"/cache?"+q, tok, nil)
	return resp.StatusCode, resp.Header.Get(jobblobs.HeaderCacheKey), b
}

func TestCacheScopesForksAndFallback(t *testing.T) {
	for name, blobs := range map[string]func(t *testing.T) blobstore.Store{
		"dir": func(t *testing.T) blobstore.Store { d, _ := blobstore.NewDir(t.TempDir()); return d },
		"s3":  func(t *testing.T) blobstore.Store { return blobtest.S3(t, 0) },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, blobs(t))
			cfg := lockfile.Job{Name: "build"}
			_, main1, tok := f.job("refs/heads/main", "main", store.TrustTrusted, cfg)
			if code, _, _ := f.restore(main1, tok, "go-aaa", "go-"); code != 404 {
				t.Fatalf("first restore: %d, want a 404 miss", code)
			}
			if code := f.save(main1, tok, "go-aaa", []byte("main cache")); code != 201 {
				t.Fatalf("save: %d", code)
			}
			if code := f.save(main1, tok, "go-aaa", []byte("again")); code != 409 {
				t.Fatalf("second save of the key: %d, want 409", code)
			}
			code, key, body := f.restore(main1, tok, "go-aaa")
			if code != 200 || key != "go-aaa" || string(body) != "main cache" {
				t.Fatalf("hit: %d %q %q", code, key, body)
			}
			// A feature branch falls back to main by prefix.
			_, feat, ftok := f.job("refs/heads/feature", "feature", store.TrustTrusted, cfg)
			if code, key, body := f.restore(feat, ftok, "go-bbb", "go-"); code != 200 || key != "go-aaa" || string(body) != "main cache" {
				t.Fatalf("feature fallback: %d %q %q", code, key, body)
			}
			if code := f.save(feat, ftok, "go-bbb", []byte("feature cache")); code != 201 {
				t.Fatalf("feature save: %d", code)
			}
			// A fork pull request reads the base branch's cache but cannot write.
			_, fork, ktok := f.job("refs/pull/7/head", "main", store.TrustUnknown, cfg)
			if code, key, _ := f.restore(fork, ktok, "go-ccc", "go-"); code != 200 || key != "go-aaa" {
				t.Fatalf("fork restore: %d %q (want main's go-aaa, never the feature's)", code, key)
			}
			resp, msg := f.do("PUT", "/api/v1/jobs/"+fork+"/cache?key=go-evil", ktok, strings.NewReader("poison"))
			if resp.StatusCode != 403 || !strings.Contains(string(msg), "fork") {
				t.Fatalf("fork save: %d %s", resp.StatusCode, msg)
			}
			if list, _ := f.st.ListCacheEntries(context.Background(), "o1"); len(list) != 2 {
				t.Fatalf("%d cache entries after the fork job, want 2", len(list))
			}
			// Credentials: missing, wrong job, finished job.
			if code, _, _ := f.restore(main1, "", "go-aaa"); code != 401 {
				t.Errorf("no credential: %d", code)
			}
			if code, _, _ := f.restore(feat, tok, "go-aaa"); code != 403 {
				t.Errorf("another job's credential: %d", code)
			}
			if _, err := f.st.UpdateJobStatus(context.Background(), main1, []status.Job{status.JobRunning}, status.JobSuccess, store.JobUpdate{}); err != nil {
				t.Fatal(err)
			}
			if code, _, _ := f.restore(main1, tok, "go-aaa"); code != 401 {
				t.Errorf("credential of a finished job: %d", code)
			}
		})
	}
}

func TestCacheQuotaEvictsOldestAndTTL(t *testing.T) {
	d, _ := blobstore.NewDir(t.TempDir())
	f := newFixture(t, d)
	f.set.set(cluster.UserCacheQuotaBytes, 2500)
	cfg := lockfile.Job{Name: "build"}
	_, j, tok := f.job("refs/heads/main", "main", store.TrustTrusted, cfg)
	for _, k := range []string{"k1", "k2"} {
		if code := f.save(j, tok, k, make([]byte, 1000)); code != 201 {
			t.Fatalf("save %s: %d", k, code)
		}
		wait.Elapse(t.Context(), 5*time.Millisecond) // k1 is used strictly before k2
	}
	if code := f.save(j, tok, "k3", make([]byte, 1000)); code != 201 { // 3000 > 2500: k1 goes
		t.Fatalf("save k3: %d", code)
	}
	for k, want := range map[string]int{"k1": 404, "k2": 200, "k3": 200} {
		if code, _, _ := f.restore(j, tok, k); code != want {
			t.Errorf("after quota eviction, %s: %d, want %d", k, code, want)
		}
	}
	// One entry larger than the whole quota is cut mid-stream.
	if code := f.save(j, tok, "huge", make([]byte, 4000)); code != 413 {
		t.Errorf("over-quota save: %d, want 413", code)
	}
	// TTL: an entry unused for longer than userCacheTtlMs is gone.
	f.set.set(cluster.UserCacheTTLMs, 1000)
	wait.Elapse(t.Context(), 1100*time.Millisecond) // the wall clock moves past k3's last use + TTL
	if code, _, _ := f.restore(j, tok, "k3"); code != 404 {
		t.Errorf("expired cache restored: %d", code)
	}
	if list, _ := f.st.ListCacheEntries(context.Background(), "o1"); len(list) != 1 {
		t.Errorf("entries after one expired on read: %d, want 1 (k2, swept later)", len(list))
	}
	if _, c, err := f.svc.Sweep(context.Background()); err != nil || c != 1 {
		t.Errorf("sweep removed %d caches (%v), want 1", c, err)
	}
}

func TestArtifactsLimitsAndBinding(t *testing.T) {
	for name, blobs := range map[string]func(t *testing.T) blobstore.Store{
		"dir": func(t *testing.T) blobstore.Store { d, _ := blobstore.NewDir(t.TempDir()); return d },
		"s3":  func(t *testing.T) blobstore.Store { return blobtest.S3(t, 0) },
	} {
		t.Run(name, func(t *testing.T) {
			testArtifacts(t, newFixture(t, blobs(t)))
		})
	}
}

func testArtifacts(t *testing.T, f *fixture) {
	f.set.set(cluster.ArtifactMaxBytes, 6<<20)
	f.set.set(cluster.ArtifactMaxPerRun, 2)
	up := lockfile.Job{Name: "build", Artifacts: []lockfile.Artifact{{Name: "bin", Paths: []string{"x"}}, {Name: "big", Paths: []string{"x"}}, {Name: "docs", Paths: []string{"x"}}}}
	runID, ids, toks := f.run("refs/heads/main", "main", store.TrustTrusted, up, lockfile.Job{Name: "test", Download: []string{"bin"}})
	j, tok := ids[0], toks[0]
	payload := make([]byte, 100_000)
	rand.Read(payload)
	resp, b := f.do("PUT", "/api/v1/jobs/"+j+"/artifacts/bin", tok, bytes.NewReader(payload))
	if resp.StatusCode != 201 {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	resp, b = f.do("PUT", "/api/v1/jobs/"+j+"/artifacts/other", tok, strings.NewReader("x"))
	if resp.StatusCode != 403 {
		t.Errorf("undeclared artifact: %d %s", resp.StatusCode, b)
	}
	// Over artifactMaxBytes: refused mid-stream, nothing stored.
	resp, b = f.do("PUT", "/api/v1/jobs/"+j+"/artifacts/big", tok, io.LimitReader(rand.Reader, 20<<20))
	if resp.StatusCode != 413 || !strings.Contains(string(b), "artifactMaxBytes") {
		t.Errorf("oversized upload: %d %s", resp.StatusCode, b)
	}
	if _, err := f.st.GetArtifact(context.Background(), runID, "big"); err == nil {
		t.Error("a cut upload was recorded")
	}
	resp, _ = f.do("PUT", "/api/v1/jobs/"+j+"/artifacts/docs", tok, strings.NewReader("docs"))
	if resp.StatusCode != 201 {
		t.Fatalf("second artifact: %d", resp.StatusCode)
	}
	// artifactMaxPerRun = 2.
	resp, b = f.do("PUT", "/api/v1/jobs/"+j+"/artifacts/big", tok, strings.NewReader("small now"))
	if resp.StatusCode != 507 || !strings.Contains(string(b), "artifactMaxPerRun") {
		t.Errorf("third artifact of the run: %d %s", resp.StatusCode, b)
	}
	// A downstream job of the same run downloads what it declares, with
	// the recorded digest.
	resp, got := f.do("GET", "/api/v1/jobs/"+ids[1]+"/artifacts/bin", toks[1], nil)
	sum := sha256.Sum256(payload)
	if resp.StatusCode != 200 || !bytes.Equal(got, payload) || resp.Header.Get(jobblobs.HeaderSHA256) != hex.EncodeToString(sum[:]) {
		t.Fatalf("download by the dependent job: %d, %d bytes, sha %s", resp.StatusCode, len(got), resp.Header.Get(jobblobs.HeaderSHA256))
	}
	if resp, _ := f.do("GET", "/api/v1/jobs/"+ids[1]+"/artifacts/docs", toks[1], nil); resp.StatusCode != 403 {
		t.Errorf("download of an undeclared artifact: %d", resp.StatusCode)
	}
	list, err := f.svc.ListArtifacts(context.Background(), runID)
	if err != nil || len(list) != 2 || list[0].Name != "bin" || list[0].SizeBytes != int64(len(payload)) {
		t.Fatalf("list: %+v %v", list, err)
	}
	_, rc, err := f.svc.OpenArtifact(context.Background(), runID, "bin")
	if err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("download: %d bytes, %v", len(got), err)
	}
	resp, _ = f.do("GET", "/api/v1/jobs/"+j+"/artifacts/bin", tok, nil)
	if resp.StatusCode != 403 {
		t.Errorf("download by a job that does not declare it: %d", resp.StatusCode)
	}
}
