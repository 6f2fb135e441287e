package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"kici.dev/kici/internal/protocol"
)

// mustJobDir is makeJobDir that fails the test on an error.
func mustJobDir(t *testing.T, root string, d *protocol.JobDispatch) *jobDir {
	t.Helper()
	jd, err := makeJobDir(root, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(jd.release)
	return jd
}

func TestJobDirIsTheSamePathRunAfterRun(t *testing.T) {
	root := t.TempDir()
	d := &protocol.JobDispatch{JobID: "j1", RepoURL: "https://git.example/acme/api.git", WorkflowName: "ci", JobName: "test (amd64)",
		MatrixValues: map[string]string{"goarch": "amd64", "os": "linux"}}
	first := mustJobDir(t, root, d)
	if got := filepath.Base(first.Path); !strings.HasPrefix(got, "kici-job-test-amd64-") || len(got) != len("kici-job-test-amd64-")+8 {
		t.Errorf("job directory %q, want kici-job-test-amd64-<8 hex digits>", got)
	}
	if jobDirLine(first) != "Work directory <work root>/"+filepath.Base(first.Path) {
		t.Errorf("log line %q", jobDirLine(first))
	}
	long := &protocol.JobDispatch{JobName: "integration tests against every supported database"}
	if got := jobDirName(long); len(got) > 34 || !strings.HasPrefix(got, "kici-job-integration-test-") {
		t.Errorf("a long job name gives %q (%d bytes), want at most 34 bytes: sockets under HOME must fit", got, len(got))
	}
	if err := os.Remove(first.Path); err != nil {
		t.Fatal(err)
	}
	first.release()
	again := *d
	again.JobID = "j2" // a later run of the same job
	if second := mustJobDir(t, root, &again); second.Path != first.Path || second.Reclaimed {
		t.Errorf("the next run of the job works in %s (reclaimed %v), the first in %s: a restored virtualenv would break", second.Path, second.Reclaimed, first.Path)
	}

	// Any part of the job's identity changes the path.
	for name, other := range map[string]protocol.JobDispatch{
		"repository":   {RepoURL: "https://git.example/acme/web.git", WorkflowName: "ci", JobName: "test (amd64)", MatrixValues: d.MatrixValues},
		"workflow":     {RepoURL: d.RepoURL, WorkflowName: "nightly", JobName: "test (amd64)", MatrixValues: d.MatrixValues},
		"job":          {RepoURL: d.RepoURL, WorkflowName: "ci", JobName: "lint", MatrixValues: d.MatrixValues},
		"matrix value": {RepoURL: d.RepoURL, WorkflowName: "ci", JobName: "test (amd64)", MatrixValues: map[string]string{"goarch": "386", "os": "linux"}},
	} {
		if jobDirName(&other) == jobDirName(d) {
			t.Errorf("another %s gives the same directory name %s", name, jobDirName(d))
		}
	}
	// Where a key ends and its value begins is part of the identity.
	if jobDirName(&protocol.JobDispatch{JobName: "t", MatrixValues: map[string]string{"a=b": "c"}}) ==
		jobDirName(&protocol.JobDispatch{JobName: "t", MatrixValues: map[string]string{"a": "b=c"}}) {
		t.Error("matrix {a=b: c} and {a: b=c} give the same directory name")
	}
	// The matrix's order does not.
	for range 20 {
		m := map[string]string{"os": "linux", "goarch": "amd64"}
		if jobDirName(&protocol.JobDispatch{RepoURL: d.RepoURL, WorkflowName: "ci", JobName: "test (amd64)", MatrixValues: m}) != jobDirName(d) {
			t.Fatal("the same matrix values give another directory name")
		}
	}
}

func TestJobDirRunningJobsAndLinksAreNeverTaken(t *testing.T) {
	root := t.TempDir()
	d := &protocol.JobDispatch{RepoURL: "/srv/repo", WorkflowName: "ci", JobName: "build"}
	name := jobDirName(d)

	// The first slot is a running job's (locked, a file in it), the second
	// a link a step planted towards a directory of its choosing.
	running := mustJobDir(t, root, d)
	if err := os.WriteFile(filepath.Join(running.Path, "state"), []byte("the other job's"), 0o600); err != nil {
		t.Fatal(err)
	}
	target := t.TempDir()
	if err := os.Symlink(target, filepath.Join(root, name+"-2")); err != nil {
		t.Fatal(err)
	}
	got := mustJobDir(t, root, d)
	if want := filepath.Join(root, name+"-3"); got.Path != want || got.Slot != 3 || got.Reclaimed {
		t.Errorf("job directory %+v, want the first free slot %s", got, want)
	}
	if !strings.Contains(jobDirLine(got), "own name is taken") {
		t.Errorf("log line %q does not say why the job is not at its own name", jobDirLine(got))
	}
	if fi, err := os.Lstat(got.Path); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("job directory %s: %v, %v; want a new 0700 directory", got.Path, fi, err)
	}

	// Every slot in use: a directory of its own under a random name.
	for slot := 4; slot <= jobDirSlots; slot++ {
		mustJobDir(t, root, d)
	}
	spill := mustJobDir(t, root, d)
	if filepath.Dir(spill.Path) != root || !strings.HasPrefix(filepath.Base(spill.Path), "kici-job-") || strings.HasPrefix(filepath.Base(spill.Path), name) || spill.Slot != 0 {
		t.Errorf("with every slot in use the job got %+v, want a random kici-job-* directory in %s", spill, root)
	}
	if entries, _ := os.ReadDir(target); len(entries) != 0 {
		t.Errorf("the planted link's target was written to: %d entries", len(entries))
	}
	if fi, err := os.Lstat(filepath.Join(root, name+"-2")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the planted link was moved or replaced: %v, %v", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(running.Path, "state")); string(b) != "the other job's" {
		t.Errorf("the running job's directory was touched: %q", b)
	}
}

func TestJobDirLeftByAnEndedJobIsReclaimed(t *testing.T) {
	root := t.TempDir()
	d := &protocol.JobDispatch{RepoURL: "/srv/repo", WorkflowName: "ci", JobName: "build"}
	crashed := mustJobDir(t, root, d)
	if err := os.MkdirAll(filepath.Join(crashed.Path, "src", ".venv"), 0o700); err != nil {
		t.Fatal(err)
	}
	crashed.release() // its agent died: the kernel drops the lock

	next := mustJobDir(t, root, d)
	if next.Path != crashed.Path || !next.Reclaimed || next.Slot != 1 {
		t.Fatalf("next job got %+v, want %s reclaimed", next, crashed.Path)
	}
	if entries, _ := os.ReadDir(next.Path); len(entries) != 0 {
		t.Errorf("the reclaimed directory holds %d entries, want it new and empty", len(entries))
	}
	if !strings.Contains(jobDirLine(next), "left there by an earlier run") {
		t.Errorf("log line %q", jobDirLine(next))
	}
	if left, _ := filepath.Glob(filepath.Join(root, "*.left-*")); len(left) != 0 {
		t.Errorf("what was moved aside is still there: %v", left)
	}
}

func TestJobDirClaimHeldTooLongGivesARandomName(t *testing.T) {
	root := t.TempDir()
	holdClaim(t, root)
	jd := mustJobDir(t, root, &protocol.JobDispatch{JobName: "build"})
	if jd.Slot != 0 || !strings.HasPrefix(filepath.Base(jd.Path), "kici-job-") || jd.lock == nil {
		t.Errorf("with the claim lock held elsewhere the job got %+v, want a random name, locked", jd)
	}
	if line := jobDirLine(jd); !strings.Contains(line, "a random name: the work root's lock was held") {
		t.Errorf("log line %q does not say why the name is random", line)
	}
}

// TestJobDirReclaimsOnlyWhereNobodyElseCouldHavePutIt: a left directory is
// taken back only in a work root that only the agent's user can write
// (anyone's, as root), or, in a sticky one, only the agent user's own.
func TestJobDirReclaimsOnlyWhereNobodyElseCouldHavePutIt(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give directories to another uid (CI runs as root)")
	}
	d := &protocol.JobDispatch{RepoURL: "/srv/repo", WorkflowName: "ci", JobName: "build"}
	name := jobDirName(d)
	for _, c := range []struct {
		what      string
		mode      os.FileMode
		leftOwner int
		reclaimed bool
	}{
		{"a private root, a job uid's leftover", 0o711, 70001, true},
		{"a group-writable root, the agent's own leftover", 0o770, 0, false},
		{"a sticky root, the agent's own leftover", 0o777 | os.ModeSticky, 0, true},
		{"a sticky root, another user's directory at the name", 0o777 | os.ModeSticky, 70001, false},
	} {
		root := t.TempDir()
		if err := os.Chmod(root, c.mode); err != nil {
			t.Fatal(err)
		}
		left := filepath.Join(root, name)
		if err := os.Mkdir(left, 0o700); err != nil || os.Chown(left, c.leftOwner, c.leftOwner) != nil {
			t.Fatal(c.what, err)
		}
		jd := mustJobDir(t, root, d)
		if got := jd.Slot == 1 && jd.Reclaimed; got != c.reclaimed {
			t.Errorf("%s: job got %+v, want reclaimed %v", c.what, jd, c.reclaimed)
		}
		if !c.reclaimed {
			if fi, err := os.Stat(left); err != nil || !fi.IsDir() || fi.Sys().(*syscall.Stat_t).Uid != uint32(c.leftOwner) {
				t.Errorf("%s: the directory at the name was touched: %v, %v", c.what, fi, err)
			}
		}
	}
}

// TestJobDirAgentsSharingARoot: jobs of one name start and end at once on
// four "agents" (each its own open files, as separate processes have), a
// quarter of them ending without removing their directory. No two live
// jobs ever share a directory and none loses its files.
func TestJobDirAgentsSharingARoot(t *testing.T) {
	root := t.TempDir()
	d := &protocol.JobDispatch{RepoURL: "/srv/repo", WorkflowName: "ci", JobName: "build"}
	var wg sync.WaitGroup
	errs := make(chan error, 4*40)
	for agent := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				jd, err := makeJobDir(root, d)
				if err != nil {
					errs <- err
					return
				}
				mine := fmt.Sprintf("agent %d job %d", agent, i)
				mark := filepath.Join(jd.Path, "owner")
				if err := os.WriteFile(mark, []byte(mine), 0o600); err != nil {
					errs <- err
				}
				runtime.Gosched()
				if b, err := os.ReadFile(mark); err != nil || string(b) != mine {
					errs <- fmt.Errorf("%s: its directory %s now holds %q (%v)", mine, jd.Path, b, err)
				}
				if i%4 != 3 { // the others "crash": their directory stays
					_ = os.RemoveAll(jd.Path)
				}
				jd.release()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	left, _ := filepath.Glob(filepath.Join(root, "*"))
	if len(left) > jobDirSlots+4 {
		t.Errorf("%d directories left in the work root, want at most the slots in use at the end: %v", len(left), left)
	}
}

func TestJobDirMissingRootIsAnError(t *testing.T) {
	if _, err := makeJobDir(filepath.Join(t.TempDir(), "absent"), &protocol.JobDispatch{JobName: "x"}); err == nil {
		t.Fatal("makeJobDir under a missing root: no error")
	}
}

func TestPathWord(t *testing.T) {
	for in, want := range map[string]string{
		"build":                  "build",
		"test (amd64)":           "test-amd64",
		"Deploy to Production!":  "deploy-to-production",
		"../..":                  "job",
		"":                       "job",
		"lint/go_vet.v2":         "lint-go_vet.v2",
		"ünïcode ✓ name":         "n-code-name",
		strings.Repeat("ab", 40): strings.Repeat("ab", 20),
	} {
		if got := pathWord(in, 40); got != want {
			t.Errorf("pathWord(%q) = %q, want %q", in, got, want)
		}
	}
	if got := pathWord("x"+strconv.Itoa(12345678901234), 8); got != "x1234567" {
		t.Errorf("cut to 8 bytes: %q", got)
	}
}

// holdClaim takes the work root's claim (an exclusive flock on root) as
// another agent would, until the test ends.
func holdClaim(t *testing.T, root string) {
	t.Helper()
	f, err := os.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
}
