// Package pgtest gives tests a fresh, empty PostgreSQL database.
//
// With KICI_TEST_DATABASE_URL set (the admin URL of a running server, e.g.
// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable) every URL
// call creates a uniquely named database on that server and drops it when
// the test ends. Without it, the first URL call starts a throwaway
// PostgreSQL server for the whole test process: initdb into a temporary
// directory (as the "postgres" system user when running as root), listening
// on a free 127.0.0.1 port with its unix socket in that directory and
// fsync off. A package that uses URL must stop that server after its tests
// with
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// (the server also receives SIGQUIT if the test process dies first). When
// PostgreSQL cannot be started, URL fails the test with the reason; it never
// skips.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the environment variable holding the admin URL of an
// already running PostgreSQL server to use instead of starting one.
const EnvURL = "KICI_TEST_DATABASE_URL"

// server is the throwaway PostgreSQL of this test process.
type server struct {
	dir      string // temp dir: data/, socket, log
	adminURL string
	cmd      *exec.Cmd
	done     chan struct{} // closed when cmd exits
	// What run needs to start the server again on the same port.
	bin, data string
	port      int
	cred      *syscall.Credential
}

var (
	startOnce sync.Once
	started   *server
	startErr  error
	stopMu    sync.Mutex
)

// URL returns the URL of a new, empty database for this test; it is dropped
// at t.Cleanup. The test fails (never skips) if no server is available.
func URL(t testing.TB) string {
	t.Helper()
	admin := os.Getenv(EnvURL)
	if admin == "" {
		startOnce.Do(func() { started, startErr = start() })
		if startErr != nil {
			t.Fatalf("pgtest: cannot start PostgreSQL (set %s to use a running server): %v", EnvURL, startErr)
		}
		admin = started.adminURL
	}
	name := "kici_test_" + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := adminExec(ctx, admin, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database on %s: %v", redact(admin), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := adminExec(ctx, admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("pgtest: parse %s: %v", EnvURL, err)
	}
	u.Path = "/" + name
	return u.String()
}

// NewDatabase is URL for programs that are not tests (the benchmark
// command): it starts the throwaway server on first use (or uses
// KICI_TEST_DATABASE_URL's server) and creates a new, empty database,
// returning its URL. The caller drops nothing; Stop removes the whole
// throwaway server when the program is done.
func NewDatabase(ctx context.Context) (string, error) {
	admin := os.Getenv(EnvURL)
	if admin == "" {
		startOnce.Do(func() { started, startErr = start() })
		if startErr != nil {
			return "", startErr
		}
		admin = started.adminURL
	}
	name := "kici_bench_" + randomHex(8)
	if err := adminExec(ctx, admin, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("pgtest: create database on %s: %w", redact(admin), err)
	}
	u, err := url.Parse(admin)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// Main runs the package's tests, then stops the server URL may have started
// and removes its directory, and exits with the tests' status.
func Main(m *testing.M) { os.Exit(RunMain(m)) }

// RunMain is Main without the exit: it runs the tests, stops the server URL
// may have started, and returns the tests' exit code, for a TestMain that
// has its own cleanup to do before os.Exit.
func RunMain(m *testing.M) int {
	code := m.Run()
	if err := Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
	}
	return code
}

// Stop stops the self-started server (immediate shutdown) and removes its
// directory. It is a no-op when none was started; Main calls it.
func Stop() error {
	stopMu.Lock()
	defer stopMu.Unlock()
	s := started
	if s == nil {
		return nil
	}
	started = nil
	startErr = errors.New("pgtest: server already stopped")
	return s.remove()
}

// halt stops the server process with sig (SIGQUIT: immediate shutdown;
// SIGINT: fast shutdown, which writes a checkpoint first), keeping its
// data.
func (s *server) halt(sig syscall.Signal) error {
	if s.cmd == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(sig)
	var err error
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		err = errors.New("postgres did not stop within 10s; killed")
	}
	s.cmd, s.done = nil, nil
	return err
}

// remove halts the server and deletes its directory.
func (s *server) remove() error {
	return errors.Join(s.halt(syscall.SIGQUIT), os.RemoveAll(s.dir))
}

func adminExec(ctx context.Context, admin, sql string) error {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<invalid url>"
	}
	return u.Redacted()
}

// binDir finds the directory holding initdb and postgres: pg_config
// --bindir, then /usr/lib/postgresql/15/bin, then PATH.
func binDir() (string, error) {
	var tried []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dir := strings.TrimSpace(string(out))
		if hasServer(dir) {
			return dir, nil
		}
		tried = append(tried, dir+" (pg_config --bindir)")
	} else {
		tried = append(tried, "pg_config: "+err.Error())
	}
	if dir := "/usr/lib/postgresql/15/bin"; hasServer(dir) {
		return dir, nil
	}
	tried = append(tried, "/usr/lib/postgresql/15/bin")
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil && hasServer(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
		if hasServer(filepath.Dir(p)) {
			return filepath.Dir(p), nil
		}
	}
	tried = append(tried, "PATH")
	return "", fmt.Errorf("no PostgreSQL server binaries (initdb, postgres) found; looked in %s", strings.Join(tried, ", "))
}

func hasServer(dir string) bool {
	for _, b := range []string{"initdb", "postgres"} {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.IsDir() {
			return false
		}
	}
	return true
}

// start initialises and starts the throwaway server.
func start() (*server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kici-pgtest-")
	if err != nil {
		return nil, err
	}
	s := &server{dir: dir}
	ok := false
	defer func() {
		if !ok {
			if s.cmd != nil && s.done != nil {
				_ = s.cmd.Process.Kill()
				<-s.done
			}
			os.RemoveAll(dir)
		}
	}()

	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root and no 'postgres' system user to run the server as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, fmt.Errorf("chown %s to postgres: %w", dir, err)
		}
	}
	data := filepath.Join(dir, "data")
	if err := initCluster(bin, dir, data, cred); err != nil {
		return nil, err
	}

	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s.bin, s.data, s.port, s.cred = bin, data, port, cred
		lastErr = s.run(bin, data, port, cred)
		if lastErr == nil {
			ok = true
			return s, nil
		}
	}
	return nil, lastErr
}

// run starts postgres on port and waits until it accepts connections.
func (s *server) run(bin, data string, port int, cred *syscall.Credential) error {
	logPath := filepath.Join(s.dir, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port="+strconv.Itoa(port),
		"-c", "unix_socket_directories="+s.dir,
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=300",
		"-c", "shared_buffers=64MB",
	)
	cmd.Dir = s.dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
	// Pdeathsig: if the test process dies without Main's Stop, the server
	// gets an immediate-shutdown signal rather than lingering.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	s.adminURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)

	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-done:
			s.cmd, s.done = nil, nil
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("postgres exited during startup (%v):\n%s", cmd.ProcessState, log)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, s.adminURL)
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			s.cmd, s.done = nil, nil
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("postgres not ready after 60s: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
