package runner

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/agent/supervisor"
)

// TestUIDPoolGivesEachLiveJobItsOwnUID: uids taken from a pool are all
// different while held, a full pool says which setting to widen, and a
// released uid can be taken again. The lock files work across processes
// (flock), so agents of one host never share a uid either.
func TestUIDPoolGivesEachLiveJobItsOwnUID(t *testing.T) {
	pool := &UIDPool{First: 4_000_000_000, Last: 4_000_000_003, LockDir: t.TempDir()}
	seen := map[uint32]bool{}
	var releases []func()
	for range 4 {
		u, release, err := pool.Acquire()
		if err != nil {
			t.Fatal(err)
		}
		if seen[u.UID] || u.UID < pool.First || u.UID > pool.Last || u.GID != u.UID {
			t.Fatalf("uid %d:%d handed out twice or outside %s", u.UID, u.GID, pool)
		}
		seen[u.UID] = true
		releases = append(releases, release)
	}
	if _, _, err := pool.Acquire(); err == nil || !strings.Contains(err.Error(), "KICI_STEP_UID_RANGE") {
		t.Fatalf("full pool: err %v, want one naming KICI_STEP_UID_RANGE", err)
	}
	releases[2]()
	u, release, err := pool.Acquire()
	if err != nil || !seen[u.UID] {
		t.Fatalf("after a release: %v %v", u, err)
	}
	release()
	for _, bad := range []string{"", "5", "0-10", "10-5", "a-b", "1-2000000"} {
		if _, err := ParseUIDRange(bad); err == nil {
			t.Errorf("range %q accepted", bad)
		}
	}
	if p, err := ParseUIDRange(DefaultUIDRange); err != nil || p.String() != DefaultUIDRange {
		t.Errorf("default range: %v %v", p, err)
	}
}

// BenchmarkStepStart measures what the sandbox adds to each step on bare
// metal: starting `true` under the plain supervisor, and under the root
// sandbox with a job's view (own mount, PID and IPC namespaces, the host
// remounted read-only, /tmp, /var/tmp and /dev/shm fresh, the work root
// hidden, the job's work directory bound back, a fresh /proc) as a job's
// uid; the agent's probe of the sandbox at start; and taking and freeing a
// job's uid. Needs root for the sandbox.
//
//	go test -run '^$' -bench BenchmarkStepStart -benchtime 50x ./internal/agent/runner
func BenchmarkStepStart(b *testing.B) {
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	root := b.TempDir()
	if err := os.Chmod(root, 0o711); err != nil {
		b.Fatal(err)
	}
	work := filepath.Join(root, "kici-job-1")
	if err := os.Mkdir(work, 0o755); err != nil {
		b.Fatal(err)
	}
	plain := []string{self, SupervisorArg}
	run := func(b *testing.B, prefix, view []string, user *StepUser) {
		for b.Loop() {
			res := runProcess(procSpec{Argv: []string{"/bin/true"}, Dir: work, Env: []string{"PATH=/usr/bin:/bin"},
				Stdout: io.Discard, Stderr: io.Discard, Supervisor: prefix, View: view, User: user, TimeoutGrace: time.Second},
				stopSignal{Grace: func() time.Duration { return time.Second }})
			if res.ExitCode != 0 || res.StartErr != nil {
				b.Fatalf("step: exit %d, %v", res.ExitCode, res.StartErr)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/step")
	}
	b.Run("supervisor", func(b *testing.B) { run(b, plain, nil, nil) })
	b.Run("sandbox", func(b *testing.B) {
		if os.Geteuid() != 0 {
			b.Skip("the root sandbox needs root")
		}
		view := []string{supervisor.TmpfsFlag + "/tmp", supervisor.TmpfsFlag + "/var/tmp", supervisor.TmpfsFlag + "/dev/shm",
			supervisor.HideFlag + root, supervisor.BindFlag + work}
		run(b, SandboxedSupervisor(plain, nil, nil), view, &StepUser{UID: 79999, GID: 79999})
	})
	b.Run("probe", func(b *testing.B) { // once per agent start
		if os.Geteuid() != 0 {
			b.Skip("the root sandbox needs root")
		}
		for b.Loop() {
			if err := ProbeNamespaces(SandboxedSupervisor(plain, nil, nil)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/agent")
	})
	b.Run("uid", func(b *testing.B) {
		pool := &UIDPool{First: 70000, Last: 79999, LockDir: b.TempDir()}
		for b.Loop() {
			_, release, err := pool.Acquire()
			if err != nil {
				b.Fatal(err)
			}
			release()
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/job")
	})
}
