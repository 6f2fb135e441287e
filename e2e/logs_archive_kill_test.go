package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"kici.dev/kici/internal/blobstore/blobtest"
	"kici.dev/kici/internal/testutil/wait"
)

// archiveCutS3 is an in-process S3 server (gofakes3) that holds back the
// first upload of a step's archive index (step 0's): the archiver writes a step's
// data object first, then its index, then records the marker in the
// database (internal/logstore, Archived). While that index upload is held,
// the data object is stored and the marker is not — the node is exactly
// mid-archive, observed from outside the process, with no hook in it.
type archiveCutS3 struct {
	URL     string
	backend *s3mem.Backend
	// held receives the key of the index upload being held, once.
	held chan string
	// release lets the held request answer (with an error: its client is
	// gone by then).
	release chan struct{}
	once    sync.Once
}

func newArchiveCutS3(t *testing.T) *archiveCutS3 {
	t.Helper()
	s := &archiveCutS3{backend: s3mem.New(), held: make(chan string, 1), release: make(chan struct{})}
	if err := s.backend.CreateBucket(blobtest.Bucket); err != nil {
		t.Fatal(err)
	}
	fake := gofakes3.New(s.backend).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/step-0.index.json") {
			first := false
			s.once.Do(func() { first = true })
			if first {
				key := strings.TrimPrefix(r.URL.Path, "/"+blobtest.Bucket+"/")
				s.held <- key
				<-s.release
				http.Error(w, "held until the node died", http.StatusServiceUnavailable)
				return
			}
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		s.once.Do(func() {}) // nothing held any more
		select {
		case <-s.release:
		default:
			close(s.release)
		}
		srv.Close()
	})
	s.URL = srv.URL
	return s
}

// has reports whether key is stored.
func (s *archiveCutS3) has(t *testing.T, key string) bool {
	t.Helper()
	_, err := s.backend.HeadObject(blobtest.Bucket, key)
	return err == nil
}

// A node SIGKILLed in the middle of archiving a big step log — its data
// object written, its index upload in flight, no marker recorded — leaves
// the live log in charge, and the same node restarted archives it again:
// every line reads back once, in order, from the archive, and the live
// rows are gone.
func TestLogArchiveNodeKilledMidArchiveIsCompletedAfterRestart(t *testing.T) {
	const n = 60000
	s3 := newArchiveCutS3(t)
	c := startClusterHarness(t, 1,
		"KICI_STORAGE_TYPE=s3", "KICI_STORAGE_BUCKET="+blobtest.Bucket, "KICI_STORAGE_ENDPOINT="+s3.URL,
		"KICI_STORAGE_FORCE_PATH_STYLE=true", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"KICI_LOG_ARCHIVE_AFTER_MS=0")
	o := c.Nodes[0]
	repo := repoWithWorkflow(t, fmt.Sprintf(`name: big-log
on: {push: {branches: [main]}}
jobs:
  print:
    steps:
      - run: seq 1 %d | sed 's/^/archived line /'
`, n))
	_, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)
	if r := o.waitRunStatus(t, runID, 3*time.Minute, "success", "failed", "cancelled"); r.Status != "success" {
		t.Fatalf("run = %s (%s)", r.Status, r.FailureReason)
	}
	jobID := o.jobsOf(t, runID)["print"].JobID
	want := func(i int) string { return "archived line " + strconv.Itoa(i+1) }

	var key string
	select {
	case key = <-s3.held:
	case <-time.After(2 * time.Minute):
		t.Fatal("the node never uploaded an archive index")
	}
	if !strings.Contains(key, "/"+jobID+"/") {
		t.Fatalf("held index %q is not the job %s's", key, jobID)
	}
	dataKey := strings.TrimSuffix(key, ".index.json") + ".chunks"
	const step = 0
	// Mid-archive, seen from outside: the data object is stored, the index
	// is not, and the database still holds the live lines and no marker.
	if !s3.has(t, dataKey) || s3.has(t, key) {
		t.Fatalf("at the cut: data object stored %v (want true), index stored %v (want false)", s3.has(t, dataKey), s3.has(t, key))
	}
	conn, err := pgx.Connect(context.Background(), c.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	state := func() (marked bool, rows int) {
		t.Helper()
		if err := conn.QueryRow(context.Background(), `SELECT
			(SELECT archive IS NOT NULL FROM step_log_heads WHERE job_id = $1 AND step_index = $2),
			(SELECT count(*) FROM step_log_chunks WHERE job_id = $1 AND step_index = $2)`, jobID, step).Scan(&marked, &rows); err != nil {
			t.Fatal(err)
		}
		return marked, rows
	}
	if marked, rows := state(); marked || rows == 0 {
		t.Fatalf("at the cut: marker recorded %v (want false), %d live rows (want some)", marked, rows)
	}

	c.Kill9(t, 0)
	close(s3.release)
	c.Start(t, 0)
	o = c.Nodes[0]

	wait.For(t, 60*time.Second, "the restarted node to archive the step and delete its live rows", func() bool {
		marked, rows := state()
		return marked && rows == 0
	})
	if !s3.has(t, key) {
		t.Fatalf("index %s missing after the archive completed", key)
	}
	if err := checkSequence(o.readLog(t, runID, jobID, step), n, want); err != nil {
		t.Fatalf("log read back through the API after the restarted archive: %v", err)
	}
	out := o.admin(t, "runs", "logs", runID, "--job", "print", "--step", "0", "--raw")
	if err := checkSequence(strings.Split(strings.TrimRight(out, "\n"), "\n"), n, want); err != nil {
		t.Fatalf("kici-admin runs logs after the restarted archive: %v", err)
	}
	var live int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM step_log_chunks WHERE job_id = $1`, jobID).Scan(&live); err != nil {
		t.Fatal(err)
	}
	if live != 0 {
		t.Fatalf("%d live step_log_chunks rows left for the job after the archive", live)
	}
}
