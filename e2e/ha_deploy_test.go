package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// What operators deploy with (docs/deploy.md): the orchestrator image of
// `make image` and the systemd units of `make install`.

var (
	haImageOnce sync.Once
	haImageName = "kici-orchestrator-e2e:latest" // fixed: a rerun replaces it
	haImageErr  error
)

// buildOrchestratorImage runs `make image` with the binaries this test
// process built, once per process.
func buildOrchestratorImage(t *testing.T) string {
	t.Helper()
	haImageOnce.Do(func() {
		cmd := exec.Command("make", "--no-print-directory", "image", "BIN="+binDir, "IMAGE="+haImageName)
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			haImageErr = fmt.Errorf("make image: %v\n%s", err, out)
		}
	})
	if haImageErr != nil {
		t.Fatal(haImageErr)
	}
	return haImageName
}

// docker runs the docker CLI and returns its trimmed output, failing the
// test on a non-zero exit.
func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// The image runs the orchestrator as the unprivileged kici user on the
// embedded default, turns healthy through its own HEALTHCHECK (no curl in a
// scratch image: `kici-orchestrator healthcheck`), exposes 4000, carries its
// labels, and stops cleanly on SIGTERM.
func TestHAOrchestratorImageRunsHealthyAsNonRoot(t *testing.T) {
	image := buildOrchestratorImage(t)
	var cfg struct {
		User         string
		ExposedPorts map[string]any
		Labels       map[string]string
		Healthcheck  struct{ Test []string }
	}
	if err := json.Unmarshal([]byte(docker(t, "image", "inspect", "--format", "{{json .Config}}", image)), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.User != "10001:10001" || cfg.ExposedPorts["4000/tcp"] == nil || cfg.Labels["org.opencontainers.image.title"] != "kici-orchestrator" ||
		cfg.Labels["org.opencontainers.image.version"] == "" || !strings.Contains(strings.Join(cfg.Healthcheck.Test, " "), "healthcheck") {
		t.Fatalf("image config = %+v, want user 10001, port 4000, OCI labels and a healthcheck", cfg)
	}

	name := fmt.Sprintf("kici-e2e-image-%d", time.Now().UnixNano())
	docker(t, "run", "-d", "--name", name, "--health-interval", "1s", "--health-start-period", "1s", image)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("docker", "logs", name).CombinedOutput()
			t.Logf("container log:\n%s", out)
		}
		_ = exec.Command("docker", "rm", "-f", name).Run()
	})
	wait.For(t, 60*time.Second, "the container to turn healthy", func() bool {
		return docker(t, "inspect", "--format", "{{.State.Health.Status}}", name) == "healthy"
	})
	if id := docker(t, "exec", name, "id", "-u"); id != "10001" {
		t.Errorf("orchestrator runs as uid %s, want 10001", id)
	}
	// The probe fails, and says why, when nothing answers.
	out, err := exec.Command("docker", "exec", name, "kici-orchestrator", "healthcheck", "--url", "http://127.0.0.1:1").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "127.0.0.1:1") {
		t.Errorf("healthcheck of a closed port: err %v, output %q; want exit 1 naming the URL", err, out)
	}
	if ready := docker(t, "exec", name, "kici-orchestrator", "healthcheck", "--ready"); ready != "" {
		t.Errorf("healthcheck --ready printed %q", ready)
	}
	docker(t, "stop", "-t", "30", name)
	if code := docker(t, "inspect", "--format", "{{.State.ExitCode}}", name); code != "0" {
		t.Errorf("orchestrator exit code after SIGTERM = %s, want 0", code)
	}
}

// unitDirectives parses a systemd unit into section → key → values.
func unitDirectives(t *testing.T, path string) map[string]map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	units := map[string]map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
			units[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s: malformed line %q", path, line)
			}
			units[section][k] = append(units[section][k], v)
		}
	}
	return units
}

// `make install` into a DESTDIR puts the binaries, both units, their
// sysusers entry, private example environment files and the docs in place
// (starting nothing); each unit runs as its own user, sandboxed, with its
// state directory and an EnvironmentFile, restarts on failure, names the
// installed binary, and passes `systemd-analyze verify` where systemd is
// installed (it is on the machines `make test` runs on).
func TestHASystemdUnitsInstalledSandboxed(t *testing.T) {
	dest := t.TempDir()
	cmd := exec.Command("make", "--no-print-directory", "install", "BIN="+binDir, "DESTDIR="+dest, "PREFIX=/opt/kici")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	for _, b := range []string{"kici-orchestrator", "kici-agent", "kici-step-supervisor", "kici-admin", "kici"} {
		if fi, err := os.Stat(filepath.Join(dest, "opt/kici/bin", b)); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("installed %s: %v", b, err)
		}
	}
	for _, e := range []string{"orchestrator.env", "agent.env"} {
		if fi, err := os.Stat(filepath.Join(dest, "etc/kici", e)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("example env file %s: %v (want mode 0600: it holds secrets)", e, err)
		}
	}
	sysusers, err := os.ReadFile(filepath.Join(dest, "opt/kici/lib/sysusers.d/kici.conf"))
	if err != nil {
		t.Fatal(err)
	}
	unitDir := filepath.Join(dest, "opt/kici/lib/systemd/system")
	want := map[string]string{"kici-orchestrator.service": "kici-orchestrator", "kici-agent.service": "kici-agent"}
	verify := []string{"verify"}
	for unit, bin := range want {
		path := filepath.Join(unitDir, unit)
		svc := unitDirectives(t, path)["Service"]
		for k, v := range map[string]string{"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
			"PrivateTmp": "yes", "Restart": "on-failure", "ExecStart": "/opt/kici/bin/" + bin} {
			if got := svc[k]; len(got) != 1 || got[0] != v {
				t.Errorf("%s: %s=%v, want %s", unit, k, got, v)
			}
		}
		if u := svc["User"]; len(u) != 1 || u[0] == "root" || !strings.Contains(string(sysusers), "u "+u[0]+" ") {
			t.Errorf("%s: User=%v, want a dedicated user declared in sysusers.d/kici.conf:\n%s", unit, u, sysusers)
		}
		// Builds run inside the unit's cgroup: memory, CPU and task limits.
		for _, k := range []string{"MemoryMax", "MemoryHigh", "CPUQuota", "TasksMax"} {
			if len(svc[k]) != 1 || svc[k][0] == "" || svc[k][0] == "infinity" {
				t.Errorf("%s: %s=%v, want a limit", unit, k, svc[k])
			}
		}
		if len(svc["StateDirectory"]) != 1 || len(svc["EnvironmentFile"]) != 1 || svc["EnvironmentFile"][0] != "/etc/kici/"+strings.TrimPrefix(strings.TrimSuffix(bin, ".service"), "kici-")+".env" {
			t.Errorf("%s: StateDirectory=%v EnvironmentFile=%v", unit, svc["StateDirectory"], svc["EnvironmentFile"])
		}
		// systemd-analyze checks that ExecStart exists: point it at DESTDIR.
		b, _ := os.ReadFile(path)
		local := filepath.Join(t.TempDir(), unit)
		write(t, local, strings.ReplaceAll(string(b), "/opt/kici/bin/", dest+"/opt/kici/bin/"))
		verify = append(verify, local)
	}
	// A restarted static agent keeps its id (and so reclaims its job).
	if env := unitDirectives(t, filepath.Join(unitDir, "kici-agent.service"))["Service"]["Environment"]; !slices.Contains(env, "KICI_AGENT_ID=%H") {
		t.Errorf("kici-agent.service: Environment=%v, want KICI_AGENT_ID=%%H", env)
	}
	// The example orchestrator env listens on loopback until TLS is set.
	orchEnv, _ := os.ReadFile(filepath.Join(dest, "etc/kici/orchestrator.env"))
	if vars := envAssignments(string(orchEnv)); vars["KICI_HOST"] != "127.0.0.1" && (vars["KICI_TLS_CERT_FILE"] == "" || vars["KICI_TLS_KEY_FILE"] == "") {
		t.Errorf("orchestrator.env: KICI_HOST=%q without TLS, want 127.0.0.1", vars["KICI_HOST"])
	}
	if _, err := exec.LookPath("systemd-analyze"); err == nil {
		if out, err := exec.Command("systemd-analyze", verify...).CombinedOutput(); err != nil {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	} else {
		t.Log("systemd-analyze not installed: units checked by their directives only")
	}
	if out, err := exec.CommandContext(context.Background(), filepath.Join(dest, "opt/kici/bin/kici-orchestrator"), "version").CombinedOutput(); err != nil {
		t.Errorf("installed orchestrator: %v %s", err, out)
	}
}

// envAssignments is the KEY=value lines of an environment file, comments
// and blank lines left out.
func envAssignments(text string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			m[k] = v
		}
	}
	return m
}
