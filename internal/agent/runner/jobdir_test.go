package runner

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"kici.dev/kici/internal/protocol"
)

func TestJobDirIsTheSamePathRunAfterRun(t *testing.T) {
	root := t.TempDir()
	d := &protocol.JobDispatch{JobID: "j1", RepoURL: "https://git.example/acme/api.git", WorkflowName: "ci", JobName: "test (amd64)",
		MatrixValues: map[string]string{"goarch": "amd64"}}
	first, err := makeJobDir(root, d)
	if err != nil {
		t.Fatal(err)
	}
	if got := filepath.Base(first); !strings.HasPrefix(got, "kici-job-test-amd64-") || len(got) != len("kici-job-test-amd64-")+12 {
		t.Errorf("job directory %q, want kici-job-test-amd64-<12 hex digits>", got)
	}
	if err := os.Remove(first); err != nil {
		t.Fatal(err)
	}
	again := *d
	again.JobID = "j2" // a later run of the same job
	second, err := makeJobDir(root, &again)
	if err != nil {
		t.Fatal(err)
	}
	if second != first {
		t.Errorf("the next run of the job works in %s, the first in %s: a restored virtualenv would break", second, first)
	}

	// Any part of the job's identity changes the path.
	for name, other := range map[string]protocol.JobDispatch{
		"repository": {RepoURL: "https://git.example/acme/web.git", WorkflowName: "ci", JobName: "test (amd64)", MatrixValues: d.MatrixValues},
		"workflow":   {RepoURL: d.RepoURL, WorkflowName: "nightly", JobName: "test (amd64)", MatrixValues: d.MatrixValues},
		"job":        {RepoURL: d.RepoURL, WorkflowName: "ci", JobName: "lint", MatrixValues: d.MatrixValues},
		"matrix":     {RepoURL: d.RepoURL, WorkflowName: "ci", JobName: "test (amd64)", MatrixValues: map[string]string{"goarch": "386"}},
	} {
		if jobDirName(&other) == jobDirName(d) {
			t.Errorf("another %s gives the same directory name %s", name, jobDirName(d))
		}
	}
}

func TestJobDirNeverAdoptsWhatIsThere(t *testing.T) {
	root := t.TempDir()
	d := &protocol.JobDispatch{RepoURL: "/srv/repo", WorkflowName: "ci", JobName: "build"}
	name := jobDirName(d)

	// The first slot is a running job's (with a file in it), the second a
	// link a step planted towards a directory of its choosing.
	busy := filepath.Join(root, name)
	if err := os.Mkdir(busy, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(busy, "state"), []byte("the other job's"), 0o600); err != nil {
		t.Fatal(err)
	}
	target := t.TempDir()
	if err := os.Symlink(target, filepath.Join(root, name+"-2")); err != nil {
		t.Fatal(err)
	}
	got, err := makeJobDir(root, d)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, name+"-3"); got != want {
		t.Errorf("job directory %s, want the first free slot %s", got, want)
	}
	if fi, err := os.Lstat(got); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("job directory %s: %v, %v; want a new 0700 directory", got, fi, err)
	}
	if entries, _ := os.ReadDir(got); len(entries) != 0 {
		t.Errorf("job directory %s holds %d entries, want none", got, len(entries))
	}

	// Every slot taken: a directory of its own under a random name.
	for slot := 4; slot <= jobDirSlots; slot++ {
		if err := os.Mkdir(filepath.Join(root, name+"-"+strconv.Itoa(slot)), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	spill, err := makeJobDir(root, d)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(spill) != root || !strings.HasPrefix(filepath.Base(spill), "kici-job-") || strings.HasPrefix(filepath.Base(spill), name) {
		t.Errorf("with every slot taken the job got %s, want a random kici-job-* directory in %s", spill, root)
	}
	if entries, _ := os.ReadDir(target); len(entries) != 0 {
		t.Errorf("the planted link's target was written to: %d entries", len(entries))
	}
	if b, _ := os.ReadFile(filepath.Join(busy, "state")); string(b) != "the other job's" {
		t.Errorf("the running job's directory was touched: %q", b)
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
}
