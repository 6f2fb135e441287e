package runner

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"kici.dev/kici/internal/protocol"
)

// sweep runs sweepLeftovers on root to its end and returns its log, at
// info and above.
func sweep(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	log := slog.New(slog.NewTextHandler(&syncWriter{b: &b}, nil))
	if remove := sweepLeftovers(root, log); remove != nil {
		remove()
	}
	return b.String()
}

// mkdirWith makes dir (and its parents) with a file in a subdirectory.
func mkdirWith(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "src", ".venv"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "src", "state"), []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// mustStay fails the test unless dir is still a directory holding
// mkdirWith's file, owned by uid.
func mustStay(t *testing.T, what, dir string, uid int) {
	t.Helper()
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Sys().(*syscall.Stat_t).Uid != uint32(uid) {
		t.Errorf("%s %s was touched: %v, %v", what, dir, fi, err)
		return
	}
	if b, err := os.ReadFile(filepath.Join(dir, "src", "state")); string(b) != "kept" {
		t.Errorf("%s %s lost its file: %q, %v", what, dir, b, err)
	}
}

// mustBeGone fails the test unless nothing is at path.
func mustBeGone(t *testing.T, what, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("%s %s is still there (%v)", what, path, err)
	}
}

// TestSweepRemovesWhatEndedJobsLeft: at the agent's start, the work
// directories of crashed jobs (at the job's own name or a random one) and
// what was moved aside and not removed are removed; a running job's, a
// directory being removed by another agent, links, files and whatever is
// not named kici-job-* are not touched, nor a directory of the random
// form older agents used (kici-job-<digits>), unlocked while their job ran.
func TestSweepRemovesWhatEndedJobsLeft(t *testing.T) {
	root := t.TempDir()
	d := &protocol.JobDispatch{RepoURL: "/srv/repo", WorkflowName: "ci", JobName: "build"}

	crashed := mustJobDir(t, root, d)
	mkdirWith(t, crashed.Path)
	crashed.release() // its agent died: the kernel drops the lock
	random, err := randomJobDir(root, "every name of this job is taken", true)
	if err != nil {
		t.Fatal(err)
	}
	mkdirWith(t, random.Path)
	random.release()
	aside := filepath.Join(root, jobDirName(d)+"-2.left-0123456789ab") // its removal failed
	mkdirWith(t, aside)

	running := mustJobDir(t, root, &protocol.JobDispatch{RepoURL: "/srv/repo", WorkflowName: "ci", JobName: "test"})
	mkdirWith(t, running.Path)
	removing := filepath.Join(root, jobDirName(d)+"-3.left-ba9876543210") // another agent is removing it
	mkdirWith(t, removing)
	held, err := lockDir(removing)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	outside := t.TempDir() // a link's target, beyond the work root
	mkdirWith(t, outside)
	for _, link := range []string{"kici-job-x-0123abcd", "kici-job-x-0123abcd.left-0123456789ab"} {
		if err := os.Symlink(outside, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "kici-job-y-0123abcd"), []byte("a file"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(root, "kici-mirrors")
	mkdirWith(t, other)
	// An agent from before the stable names runs a job here, in a
	// directory of the random form it used, which it never locked.
	older := filepath.Join(root, "kici-job-3407209436")
	mkdirWith(t, older)
	// And one of the first per-job names, longer, also unlocked.
	olderStable := filepath.Join(root, "kici-job-integration-test-linux-amd64-0123456789ab")
	mkdirWith(t, olderStable)

	log := sweep(t, root)
	mustBeGone(t, "a crashed job's directory", crashed.Path)
	mustBeGone(t, "a crashed job's directory of a random name", random.Path)
	mustBeGone(t, "a directory moved aside and not removed", aside)
	if n := strings.Count(log, "level=INFO msg=\"removed a work directory an ended job left\""); n != 3 || strings.Contains(log, "WARN") {
		t.Errorf("the sweep logged %d removals, want 3 and no warning:\n%s", n, log)
	}
	for _, p := range []string{crashed.Path, random.Path, aside} {
		if !strings.Contains(log, "dir="+p+" ") { // its own name, then where it was moved aside
			t.Errorf("the sweep's log does not name %s:\n%s", p, log)
		}
	}

	mustStay(t, "a running job's directory", running.Path, os.Geteuid())
	mustStay(t, "a directory another agent is removing", removing, os.Geteuid())
	mustStay(t, "a link's target outside the work root", outside, os.Geteuid())
	for _, link := range []string{"kici-job-x-0123abcd", "kici-job-x-0123abcd.left-0123456789ab"} {
		if fi, err := os.Lstat(filepath.Join(root, link)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("the link %s was moved or replaced: %v, %v", link, fi, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "kici-job-y-0123abcd")); string(b) != "a file" {
		t.Errorf("the file kici-job-y-0123abcd was touched: %q, %v", b, err)
	}
	mustStay(t, "a directory not named kici-job-*", other, os.Geteuid())
	mustStay(t, "an older agent's job directory of a random name", older, os.Geteuid())
	mustStay(t, "an older agent's job directory of a longer name", olderStable, os.Geteuid())
	if left, _ := filepath.Glob(filepath.Join(root, "*.left-*")); len(left) != 2 {
		t.Errorf("after the sweep %v, want only the link and the directory another agent holds", left)
	}

	// Nothing left to do: nothing to run, nothing logged.
	var b strings.Builder
	if remove := sweepLeftovers(root, slog.New(slog.NewTextHandler(&syncWriter{b: &b}, nil))); remove != nil || b.Len() != 0 {
		t.Errorf("a second sweep has something to remove (%v) or logs %q", remove != nil, b.String())
	}
}

// TestSweepLeavesARootOthersCanWrite: in a work root that others than the
// agent's user may write, anything could have been put there: nothing is
// taken back.
func TestSweepLeavesARootOthersCanWrite(t *testing.T) {
	root := t.TempDir()
	if err := os.Chmod(root, 0o770); err != nil {
		t.Fatal(err)
	}
	left := filepath.Join(root, "kici-job-build-0123abcd")
	aside := filepath.Join(root, "kici-job-build-0123abcd.left-0123456789ab")
	mkdirWith(t, left)
	mkdirWith(t, aside)
	if log := sweep(t, root); log != "" {
		t.Errorf("the sweep logged %q", log)
	}
	mustStay(t, "a directory in a group-writable root", left, os.Geteuid())
	mustStay(t, "a directory moved aside in a group-writable root", aside, os.Geteuid())
}

// TestSweepInAStickyRootTakesOnlyItsOwn: in a sticky root (/tmp) only
// the agent user's own directories are taken back.
func TestSweepInAStickyRootTakesOnlyItsOwn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give directories to another uid (CI runs as root)")
	}
	root := t.TempDir()
	if err := os.Chmod(root, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(root, "kici-job-build-0123abcd")
	mkdirWith(t, own)
	var others []string
	for _, name := range []string{"kici-job-lint-0123abcd", "kici-job-lint-0123abcd.left-0123456789ab"} {
		dir := filepath.Join(root, name)
		mkdirWith(t, dir)
		if err := os.Chown(dir, 70001, 70001); err != nil {
			t.Fatal(err)
		}
		others = append(others, dir)
	}
	sweep(t, root)
	mustBeGone(t, "the agent user's own directory", own)
	for _, dir := range others {
		mustStay(t, "another user's directory", dir, 70001)
	}
}

// TestSweepWithTheClaimHeldElsewhere: a sweep that cannot have the work
// root's claim takes nothing: a directory another agent has just made is
// locked only once it is made, with the claim held.
func TestSweepWithTheClaimHeldElsewhere(t *testing.T) {
	root := t.TempDir()
	left := filepath.Join(root, "kici-job-build-0123abcd")
	mkdirWith(t, left)
	holdClaim(t, root)
	if log := sweep(t, root); log != "" {
		t.Errorf("the sweep logged %q", log)
	}
	mustStay(t, "a directory made while the claim is held elsewhere", left, os.Geteuid())
}

// TestSweepLeavesWhatAnotherIsRemoving: what one sweep moved aside stays
// locked until it is removed, so a second agent starting meanwhile does
// not take it too (two removals of one tree at once).
func TestSweepLeavesWhatAnotherIsRemoving(t *testing.T) {
	root := t.TempDir()
	left := filepath.Join(root, jobDirName(&protocol.JobDispatch{RepoURL: "/srv/repo", WorkflowName: "ci", JobName: "build"}))
	mkdirWith(t, left)
	var b strings.Builder
	first := sweepLeftovers(root, slog.New(slog.NewTextHandler(&syncWriter{b: &b}, nil)))
	if first == nil {
		t.Fatal("the first sweep found nothing to remove")
	}
	if second := sweepLeftovers(root, slog.New(slog.NewTextHandler(&syncWriter{b: &b}, nil))); second != nil {
		t.Error("a second sweep took what the first had moved aside and not yet removed")
		second()
	}
	first()
	if rest, _ := filepath.Glob(filepath.Join(root, "kici-job-*")); len(rest) != 0 {
		t.Errorf("left after the first sweep's removal: %v", rest)
	}
}

// TestSweepOwnNames: the sweep's name filter matches every name this
// version gives a job directory (its own at the edge lengths, its slots,
// a random one, each moved aside) and none of earlier versions' forms.
func TestSweepOwnNames(t *testing.T) {
	root := t.TempDir()
	var own []string
	for _, job := range []string{"build", "b", "...", "İntegration Test (linux/amd64)", "a-very-long-job-name-that-is-cut", "x.left-0123456789ab", strings.Repeat("z", 200)} {
		name := jobDirName(&protocol.JobDispatch{RepoURL: "/srv/repo", WorkflowName: "ci", JobName: job})
		own = append(own, name, name+"-2", name+"-8", name+"-8.left-0123456789ab")
	}
	for range 20 {
		jd, err := randomJobDir(root, "test", false)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(jd.Path)
		own = append(own, name, name+".left-0123456789ab")
	}
	for _, name := range own {
		if !ownName.MatchString(name) {
			t.Errorf("the sweep would not take back %q, a name this version makes", name)
		}
	}
	unclaimed, err := randomJobDirAs(root, unclaimedJobDirPattern, "test", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{filepath.Base(unclaimed.Path), "kici-job-3407209436", "kici-job-build-0123456789ab", "kici-job-build-0123456789ab-2", "kici-job-integration-test-linux-amd64-0123456789ab", "kici-job-build-0123abcd-9", "kici-job-build-0123abcd.left-01234"} {
		if ownName.MatchString(name) {
			t.Errorf("the sweep would take %q, a name of an earlier version or one made without the claim", name)
		}
	}
}

func TestSweepAsideNames(t *testing.T) {
	d := &protocol.JobDispatch{RepoURL: "/srv/repo", WorkflowName: "ci", JobName: "x.left-0123456789ab"}
	for name, want := range map[string]bool{
		"kici-job-build-0123abcd.left-0123456789ab":   true,
		"kici-job-build-0123abcd-2.left-0123456789ab": true,
		"kici-job-build-0123abcd":                     false,
		"kici-job-build-0123abcd.left-012345":         false,
		"kici-job-build-0123abcd.left-0123456789xy":   false,
		jobDirName(d):        false, // a job named like one
		jobDirName(d) + "-2": false,
	} {
		if got := isAside(name); got != want {
			t.Errorf("isAside(%q) = %v, want %v", name, got, want)
		}
	}
}
