package vmguest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Main is PID 1 of a job VM. It returns only when it cannot power the VM
// off; every failure is printed on the console (the scaler keeps it as the
// VM's console.log) and ends the VM, so the scaler sees the job's agent end.
func Main() int {
	if err := mountKernelFilesystems(); err != nil {
		fail("mounts: %v", err)
	}
	if cmdline, _ := os.ReadFile("/proc/cmdline"); strings.Contains(string(cmdline), ProbeArg) {
		fmt.Println(ProbeOK)
		powerOff()
	}
	if err := loadModules(modulesOrder); err != nil {
		fail("kernel modules: %v", err)
	}
	raw, err := os.ReadFile(ConfigPath)
	// The token must be gone before anything else runs in the guest.
	if rmErr := os.Remove(ConfigPath); rmErr != nil && err == nil {
		err = rmErr
	}
	if err != nil {
		fail("boot configuration: %v", err)
	}
	cfg, err := ParseConfig(raw)
	if err != nil {
		fail("%v", err)
	}
	if cfg.Hostname != "" {
		_ = unix.Sethostname([]byte(cfg.Hostname))
	}
	if len(cfg.Hosts) > 0 {
		if err := addHosts(cfg.Hosts); err != nil {
			fail("/etc/hosts: %v", err)
		}
	}
	if err := configureNetwork(cfg.Address, cfg.Gateway); err != nil {
		fail("network: %v", err)
	}
	for _, f := range cfg.Forwards {
		if err := relay(f); err != nil {
			fail("forward %s: %v", f, err)
		}
	}
	code := runAgent(cfg.Env)
	fmt.Printf("kici-vm-init: kici-agent ended (%s); powering off\n", code)
	powerOff()
	return 1
}

func fail(format string, args ...any) {
	fmt.Printf("kici-vm-init: "+format+"; powering off\n", args...)
	powerOff()
}

// powerOff ends the VM: QEMU runs with -no-reboot, so a restart makes it
// exit on every machine type (microvm has no ACPI power button).
func powerOff() {
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART)
	// Only reached when not PID 1 (a test): nothing else to do.
	os.Exit(1)
}

func mountKernelFilesystems() error {
	mounts := []struct {
		src, dir, fstype, data string
		flags                  uintptr
	}{
		{"proc", "/proc", "proc", "", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
		{"sysfs", "/sys", "sysfs", "", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
		{"devtmpfs", "/dev", "devtmpfs", "mode=0755", unix.MS_NOSUID},
		{"devpts", "/dev/pts", "devpts", "mode=0620,ptmxmode=0666", unix.MS_NOSUID | unix.MS_NOEXEC},
		{"tmpfs", "/dev/shm", "tmpfs", "mode=1777", unix.MS_NOSUID | unix.MS_NODEV},
		{"tmpfs", "/run", "tmpfs", "mode=0755", unix.MS_NOSUID | unix.MS_NODEV},
		{"tmpfs", "/tmp", "tmpfs", "mode=1777", unix.MS_NOSUID | unix.MS_NODEV},
		{"cgroup2", "/sys/fs/cgroup", "cgroup2", "", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
	}
	for _, m := range mounts {
		if err := os.MkdirAll(m.dir, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.src, m.dir, m.fstype, m.flags, m.data); err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mount %s on %s: %w", m.fstype, m.dir, err)
		}
	}
	return nil
}

// loadModules loads the modules listed in order (one path per line, in
// dependency order); a missing list means the kernel needs none.
func loadModules(order string) error {
	f, err := os.Open(order)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		path := strings.TrimSpace(sc.Text())
		if path == "" {
			continue
		}
		mod, err := os.Open(path)
		if err != nil {
			return err
		}
		err = unix.FinitModule(int(mod.Fd()), "", 0)
		mod.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return sc.Err()
}

// addHosts maps names to 127.0.0.1 in /etc/hosts.
func addHosts(names []string) error {
	f, err := os.OpenFile("/etc/hosts", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "127.0.0.1 %s\n", strings.Join(names, " "))
	return err
}

// configureNetwork brings up lo and eth0: with QEMU's user-network
// address and no default route (the guest reaches only ForwardAddr, the
// host ports the scaler forwards, and QEMU's gateway) when addr is empty,
// else with addr and a default route via gw (a bridge network, where the
// host's nftables decide what the guest reaches).
func configureNetwork(addr, gw string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat("/sys/class/net/" + GuestIfName); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s after loading the network driver", GuestIfName)
		}
		time.Sleep(20 * time.Millisecond)
	}
	steps := [][]string{
		{"link", "set", "lo", "up"},
		{"link", "set", GuestIfName, "up"},
		{"addr", "add", GuestAddr, "dev", GuestIfName},
	}
	if addr != "" {
		steps[2][2] = addr
		steps = append(steps, []string{"route", "add", "default", "via", gw})
	}
	for _, args := range steps {
		if out, err := exec.Command("/bin/ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// relay listens on forward (127.0.0.1:port) in the guest and copies each
// connection to ForwardAddr:port, which QEMU hands to the host's
// 127.0.0.1:port.
func relay(forward string) error {
	port, err := ForwardPort(forward)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", forward)
	if err != nil {
		return err
	}
	target := net.JoinHostPort(ForwardAddr, fmt.Sprint(port))
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go pipe(c, target)
		}
	}()
	return nil
}

func pipe(c net.Conn, target string) {
	defer c.Close()
	up, err := net.DialTimeout("tcp", target, 10*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	<-done
	<-done
}

// runAgent starts kici-agent with env and reaps every child (PID 1's job)
// until the agent itself ends; it returns how it ended.
func runAgent(env []string) string {
	env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME=/root", "TMPDIR=/tmp"}, env...)
	p, err := os.StartProcess(agentBinary, []string{agentBinary}, &os.ProcAttr{
		Dir: "/", Env: env, Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}})
	if err != nil {
		return err.Error()
	}
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return err.Error()
		}
		if pid == p.Pid {
			if ws.Signaled() {
				return "signal " + ws.Signal().String()
			}
			return fmt.Sprintf("exit status %d", ws.ExitStatus())
		}
	}
}
