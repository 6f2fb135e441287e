package scaler

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"kici.dev/kici/internal/filecopy"
)

// JailSpec is one jailer invocation.
type JailSpec struct {
	// JailerPath and ExecFile are the jailer and the firecracker binary.
	JailerPath, ExecFile string
	// ID is the VM id (the agent id).
	ID string
	// UID and GID are the ids the jailer drops to.
	UID, GID int
	// ChrootBaseDir is --chroot-base-dir.
	ChrootBaseDir string
	// APISock is the API socket path inside the jail.
	APISock string
	// Console receives the process's stdout and stderr (the serial
	// console), a host path.
	Console string
}

// Argv is the jailer command line (KiCI step 6, without
// --new-pid-ns and --daemonize: the jailer execs firecracker in place, so
// the launched process is the VMM and its process group is the VM's):
// jailer --id ID --exec-file F --uid U --gid G --chroot-base-dir B --
// --api-sock S.
func (s *JailSpec) Argv() []string {
	return []string{s.JailerPath, "--id", s.ID, "--exec-file", s.ExecFile,
		"--uid", strconv.Itoa(s.UID), "--gid", strconv.Itoa(s.GID),
		"--chroot-base-dir", s.ChrootBaseDir, "--", "--api-sock", s.APISock}
}

// VMMProcess is a launched jailer/firecracker process.
type VMMProcess interface {
	// Pid is the process id (leader of its process group).
	Pid() int
	// Done is closed once the process has ended; Err is then its wait error.
	Done() <-chan struct{}
	Err() error
	// Kill sends SIGKILL to the process group.
	Kill() error
}

// VMMLauncher starts jailer processes.
type VMMLauncher interface {
	Launch(spec *JailSpec) (VMMProcess, error)
}

// ExecLauncher runs spec.Argv() with os/exec in a new process group, with
// only PATH in its environment.
type ExecLauncher struct{}

// Launch starts the jailer.
func (ExecLauncher) Launch(spec *JailSpec) (VMMProcess, error) {
	argv := spec.Argv()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if spec.Console != "" {
		f, err := os.OpenFile(spec.Console, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start jailer: %w", err)
	}
	p := &execProc{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

type execProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (p *execProc) Pid() int { return p.cmd.Process.Pid }

func (p *execProc) Done() <-chan struct{} { return p.done }

func (p *execProc) Err() error { <-p.done; return p.err }

func (p *execProc) Kill() error { return syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }

// waitSocket waits until the API socket file exists, the process ended or
// ctx ended.
func waitSocket(ctx context.Context, sock string, proc VMMProcess) error {
	for {
		if _, err := os.Stat(sock); err == nil {
			return nil
		}
		select {
		case <-proc.Done():
			return fmt.Errorf("jailer exited before the API socket appeared: %v", proc.Err())
		case <-ctx.Done():
			return fmt.Errorf("API socket %s did not appear: %w", sock, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// linkOrCopy hard-links src to dst, or copies it when linking fails or
// src is not world-readable (the copy is then owned by uid:gid, mode 0400,
// so the original's owner and mode never change).
func linkOrCopy(src, dst string, uid, gid int) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	if fi.Mode().Perm()&0o004 != 0 {
		if err := os.Link(src, dst); err == nil {
			return nil
		}
	}
	if err := filecopy.ToNew(src, dst, 0o400); err != nil {
		return err
	}
	return os.Chown(dst, uid, gid)
}
