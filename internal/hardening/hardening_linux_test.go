//go:build linux

package hardening

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

const helperVar = "KICI_HARDENING_TEST_HELPER"

// TestMain turns the test binary into a helper process when helperVar is
// set: "target" (optionally non-dumpable) waits on stdin; "read" prints
// what reading /proc/<pid>/environ gives; "dumpable" prints what Dumpable
// reports.
func TestMain(m *testing.M) {
	switch os.Getenv(helperVar) {
	case "target-nodump":
		if err := NoDump(); err != nil {
			os.Stdout.WriteString("err " + err.Error() + "\n")
			os.Exit(1)
		}
		fallthrough
	case "target-plain":
		os.Stdout.WriteString("ready\n")
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	case "dumpable":
		d, err := Dumpable()
		os.Stdout.WriteString(strconv.FormatBool(d) + " " + fmt.Sprint(err))
		os.Exit(0)
	case "read":
		b, err := os.ReadFile("/proc/" + os.Args[len(os.Args)-1] + "/environ")
		if err != nil {
			os.Stdout.WriteString("denied " + err.Error())
		} else {
			os.Stdout.Write(b)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestNoDumpSetsFlag(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperVar+"=target-nodump")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("helper said %q", line)
	}
	// A non-dumpable process's /proc/<pid> entries belong to root.
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/"+strconv.Itoa(cmd.Process.Pid)+"/environ", &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 0 {
		t.Errorf("/proc/<pid>/environ of a non-dumpable process owned by uid %d, want 0", st.Uid)
	}
	// Control, in a fresh process: this test process cannot serve, since
	// a child started with a Credential shares its memory map until exec
	// and its setuid clears the map's dumpable flag for both.
	plain := exec.Command(os.Args[0])
	plain.Env = []string{helperVar + "=dumpable"}
	if out, err := plain.Output(); err != nil || string(out) != "true <nil>" {
		t.Errorf("a process that never called NoDump: Dumpable gave %q (%v), want true", out, err)
	}
}

// TestNoDumpHidesEnvironFromSameUser starts a target process and a reader
// process under the same unprivileged user (nobody when the test runs as
// root, else the test's own user) and checks that the reader sees the
// target's environment when the target is dumpable and cannot read it
// after NoDump.
func TestNoDumpHidesEnvironFromSameUser(t *testing.T) {
	var cred *syscall.Credential
	bin := os.Args[0]
	if os.Geteuid() == 0 {
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
		// nobody must be able to execute a copy of the test binary.
		dir, err := os.MkdirTemp("", "kici-hardening")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(dir, "helper")
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const marker = "KICI_HARDENING_MARKER=s3cr3t-value"
	readAs := func(mode string) string {
		target := exec.Command(bin)
		target.Dir = "/"
		target.Env = []string{helperVar + "=" + mode, marker}
		target.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		stdin, _ := target.StdinPipe()
		stdout, _ := target.StdoutPipe()
		if err := target.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { stdin.Close(); _ = target.Wait() }()
		if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
			t.Fatalf("%s helper said %q", mode, line)
		}
		reader := exec.Command(bin, strconv.Itoa(target.Process.Pid))
		reader.Dir = "/"
		reader.Env = []string{helperVar + "=read"}
		reader.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := reader.Output()
		if err != nil {
			t.Fatalf("reader: %v", err)
		}
		return string(out)
	}
	// Control: without NoDump the same user reads the environment, so the
	// check below can fail.
	if got := readAs("target-plain"); !strings.Contains(got, marker) {
		t.Fatalf("reading a dumpable same-user process's environ gave %q, want the marker", got)
	}
	got := readAs("target-nodump")
	if strings.Contains(got, "s3cr3t-value") {
		t.Fatalf("a same-user process read the environ of a non-dumpable process: %q", got)
	}
	if !strings.HasPrefix(got, "denied ") || !strings.Contains(got, "permission denied") {
		t.Errorf("reader got %q, want permission denied", got)
	}
}
