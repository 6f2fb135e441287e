package runner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/protocol"
)

// A job that declares services but no container is refused before any
// step runs: on the host the service names would not resolve, and the
// steps must not run there as if they had their sidecars.
func TestServicesWithoutContainerRefusedNotRunOnHost(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	res, _ := runJob(t, lockfile.Job{Services: []lockfile.Service{{Name: "db", Image: "busybox"}},
		Steps: []lockfile.Step{{Name: "s", Run: "touch " + marker}}}, nil)
	if res.State != status.JobFailed || !strings.Contains(res.Error, "services need a job container") {
		t.Fatalf("result = %+v", res)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the step ran on the host")
	}
}

// With JobHome every job sees its own empty HOME inside its work directory
// and none of the host's Go cache locations; `~` cache paths are accepted.
func TestJobHome(t *testing.T) {
	out := filepath.Join(t.TempDir(), "env")
	no := false
	lj := lockfile.Job{Type: lockfile.JobStatic, Name: "b", Checkout: &no, Steps: []lockfile.Step{{Name: "s",
		Run: `echo "home=$HOME gocache=${GOCACHE-unset} files=$(ls -A "$HOME" | wc -l)" > ` + out}}}
	cfg, _ := json.Marshal(lj)
	host := append(os.Environ(), "HOME=/root-shared", "GOCACHE=/shared/go-build")
	root := t.TempDir()
	r := New(Options{WorkRoot: root, HostEnv: host, Blobs: BlobOptions{JobHome: true}}, &recorder{})
	res := r.Run(context.Background(), &protocol.JobDispatch{RunID: "r", JobID: "j", JobConfig: cfg})
	if res.State != status.JobSuccess {
		t.Fatalf("result = %+v", res)
	}
	b, _ := os.ReadFile(out)
	got := strings.TrimSpace(string(b))
	if !strings.HasPrefix(got, "home="+root+"/kici-job-") || !strings.Contains(got, "/home gocache=unset files=0") {
		t.Errorf("step saw %q", got)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Errorf("work directory (with the job HOME) not removed: %v", ents)
	}
	j := &job{r: &Runner{opts: Options{Blobs: BlobOptions{JobHome: false}}}}
	if _, err := j.cacheRoots([]string{"~/.cache/go-build"}); err == nil || !strings.Contains(err.Error(), "shared HOME") {
		t.Errorf("~ path with a shared HOME: %v", err)
	}
}

// A container job on an agent without a reachable Docker Engine fails
// before its first step, which never runs on the host instead.
func TestContainerJobWithoutEngineNotRunOnHost(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-docker.sock"))
	marker := filepath.Join(t.TempDir(), "ran")
	res, _ := runJob(t, lockfile.Job{Container: &lockfile.Container{Image: "busybox"},
		Steps: []lockfile.Step{{Name: "s", Run: "touch " + marker}}}, nil)
	if res.State != status.JobFailed || !strings.Contains(res.Error, "no reachable Docker Engine") {
		t.Fatalf("result = %+v", res)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the step ran on the host")
	}
}

// A cache path is resolved in the job's own directories and checked again
// on the agent (a lock can be hand-written): absolute paths elsewhere,
// ".." and a symbolic link in the checkout pointing out are refused; a
// directory that does not exist yet is fine (a step creates it).
func TestCacheRootsStayInsideTheJob(t *testing.T) {
	ws, tmp, outside := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(ws, ".deps")); err != nil {
		t.Fatal(err)
	}
	id := jobIdentity{Workspace: ws, Tmp: tmp}
	for p, want := range map[string]string{
		"/var/lib/kici":  "outside the job's workspace, HOME and /tmp",
		"../x":           `".." is not allowed`,
		".deps":          "is a symbolic link",
		".deps/sub":      "is a symbolic link",
		"~/.cache/x":     "shared HOME",
		"/tmp/../etc/x":  `".." is not allowed`,
		"$HOME/.npm":     "variables are not expanded",
		"node_modules/x": "",
		"/tmp/build":     "",
	} {
		r, err := id.cacheRoot(p)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", p, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: err = %v, want %q", p, err, want)
		case want == "" && !strings.HasPrefix(r.Dir, ws) && !strings.HasPrefix(r.Dir, tmp):
			t.Errorf("%s resolved to %s", p, r.Dir)
		}
	}
}
