package config

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md")

func TestLoadDefaults(t *testing.T) {
	dir := t.TempDir()
	c, err := Load([]string{"KICI_DATA_DIR=" + dir, "PATH=/usr/bin", "KICI=true", "CI=true"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Host != "127.0.0.1" || c.Port != 4000 || c.Mode != DefaultMode || c.MaxAgents != 4 ||
		c.LogLevel != "info" || c.DispatchAckTimeout != 10*time.Second || c.AgentTokenTTL != time.Hour ||
		c.DatabaseURL != "" || c.DataDir != dir {
		t.Fatalf("defaults: %+v", c)
	}
	if got := c.DatabasePath(); got != filepath.Join(dir, "kici.db") {
		t.Fatalf("DatabasePath = %q", got)
	}
}

func TestLoadValues(t *testing.T) {
	c, err := Load([]string{
		"KICI_DATA_DIR=/srv/kici", "KICI_HOST=0.0.0.0", "KICI_PORT=0", "KICI_MODE=hybrid",
		"KICI_MAX_AGENTS=8", "KICI_LOG_LEVEL=DEBUG", "KICI_DISPATCH_ACK_TIMEOUT_MS=2500",
		"KICI_AGENT_TOKEN_TTL_MS=60000", "KICI_DATABASE_URL=postgres://u@h/db",
		"KICI_BOOTSTRAP_ADMIN_TOKEN=kadm_x", "KICI_AGENT_BINARY=/opt/kici-agent",
		"KICI_ORCHESTRATOR_URL=ws://10.0.0.1:4000/ws", "KICI_CLUSTER_ADDRESS=http://10.0.0.1:4000/",
		// agent, job, admin and test variables are accepted
		"KICI_AGENT_TOKEN=kat_1", "KICI_AGENT_ID=a1", "KICI_LABELS=x,y", "KICI_SCALER_MANAGED=true",
		"KICI_RUN_ID=r", "KICI_MATRIX_GO=1.22", "KICI_ADMIN_URL=http://x", "KICI_ADMIN_TOKEN=t",
		"KICI_TEST_DATABASE_URL=postgres://x", "KICI_WORK_DIR=/tmp",
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/srv/kici" || c.Host != "0.0.0.0" || c.Port != 0 || c.Mode != ModeHybrid || c.MaxAgents != 8 ||
		c.LogLevel != "debug" || c.DispatchAckTimeout != 2500*time.Millisecond || c.AgentTokenTTL != time.Minute ||
		c.DatabaseURL != "postgres://u@h/db" || c.BootstrapAdminToken != "kadm_x" || c.AgentBinary != "/opt/kici-agent" ||
		c.OrchestratorURL != "ws://10.0.0.1:4000/ws" || c.ClusterAddress != "http://10.0.0.1:4000" {
		t.Fatalf("values: %+v", c)
	}
}

func TestLoadUnknownVariable(t *testing.T) {
	_, err := Load([]string{"KICI_DATA_DIR=/x", "KICI_PROT=4000"})
	if err == nil {
		t.Fatal("want error")
	}
	msg := err.Error()
	for _, want := range []string{"unknown environment variable KICI_PROT", "(known: ", "KICI_PORT, ", "did you mean KICI_PORT?)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	// Far from everything: no suggestion.
	_, err = Load([]string{"KICI_DATA_DIR=/x", "KICI_ZZZZZZZZZZZZZZZZ=1"})
	if err == nil || strings.Contains(err.Error(), "did you mean") || !strings.Contains(err.Error(), "unknown environment variable KICI_ZZZZZZZZZZZZZZZZ") {
		t.Fatalf("err = %v", err)
	}
	// A bare prefix is not a prefix match.
	if _, err := Load([]string{"KICI_DATA_DIR=/x", "KICI_TEST_=1"}); err == nil {
		t.Fatal("KICI_TEST_ alone must be unknown")
	}
}

func TestLoadBadValues(t *testing.T) {
	cases := map[string]string{
		"KICI_PORT=abc":                            `KICI_PORT="abc": must be a port number`,
		"KICI_PORT=70000":                          `KICI_PORT="70000"`,
		"KICI_MODE=cloud":                          `KICI_MODE="cloud": unknown mode (allowed: independent, observed, hybrid, platform)`,
		"KICI_LOG_LEVEL=loud":                      `KICI_LOG_LEVEL="loud": unknown level`,
		"KICI_MAX_AGENTS=0":                        `KICI_MAX_AGENTS="0": must be a positive integer`,
		"KICI_DISPATCH_ACK_TIMEOUT_MS=10":          `KICI_DISPATCH_ACK_TIMEOUT_MS="10": must be an integer number of milliseconds ≥ 1000`,
		"KICI_AGENT_TOKEN_TTL_MS=1h":               `KICI_AGENT_TOKEN_TTL_MS="1h"`,
		"KICI_DATABASE_URL=mysql://x/y":            `KICI_DATABASE_URL: must be a postgres://`,
		"KICI_STEP_LOG_MAX_BYTES=1k":               `KICI_STEP_LOG_MAX_BYTES="1k": must be a number of bytes`,
		"KICI_STEP_LOG_MAX_BYTES=100":              `≥ 65536, or 0 for no cap`,
		"KICI_LOG_ARCHIVE=maybe":                   `KICI_LOG_ARCHIVE="maybe": must be true or false`,
		"KICI_STEP_LOG_COMPRESS=s2":                `KICI_STEP_LOG_COMPRESS="s2": must be true or false`,
		"KICI_CLUSTER_ADDRESS=10.0.0.2:4000":       `KICI_CLUSTER_ADDRESS: not a URL with a host`,
		"KICI_CLUSTER_ADDRESS=ws://10.0.0.2:4000":  `the scheme must be http or https`,
		"KICI_CLUSTER_ADDRESS=http://h:1/ws":       `no path, query or fragment`,
		"KICI_CLUSTER_ADDRESS=http://h:99999":      `the port must be 1–65535`,
		"KICI_CLUSTER_ADDRESS=http://h:0":          `the port must be 1–65535`,
		"KICI_CLUSTER_ADDRESS=http://u:pw@h:1":     `KICI_CLUSTER_ADDRESS="http://h:1": user info`,
		"KICI_CLUSTER_ADDRESS=http://0.0.0.0:4000": `0.0.0.0 is not an address anyone can dial`,
	}
	for kv, want := range cases {
		_, err := Load([]string{"KICI_DATA_DIR=/x", kv})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", kv, err, want)
		}
	}
	// Several problems are all reported.
	_, err := Load([]string{"KICI_PORT=x", "KICI_MODE=y", "KICI_FOO=1"})
	if err == nil || !strings.Contains(err.Error(), "KICI_PORT") || !strings.Contains(err.Error(), "KICI_MODE") || !strings.Contains(err.Error(), "KICI_FOO") {
		t.Fatalf("err = %v", err)
	}
}

func TestDataDirResolution(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	yes := func(string) bool { return true }
	no := func(string) bool { return false }
	if got := resolveDataDir(env(nil), yes); got != "/var/lib/kici" {
		t.Errorf("writable system dir: %q", got)
	}
	if got := resolveDataDir(env(map[string]string{"XDG_STATE_HOME": "/x/state", "HOME": "/home/u"}), no); got != "/x/state/kici" {
		t.Errorf("xdg: %q", got)
	}
	if got := resolveDataDir(env(map[string]string{"HOME": "/home/u"}), no); got != "/home/u/.local/state/kici" {
		t.Errorf("home: %q", got)
	}
	if got := resolveDataDir(env(map[string]string{"TMPDIR": "/scratch"}), no); got != "/scratch/kici-data" {
		t.Errorf("tmp: %q", got)
	}
	if got := resolveDataDir(env(nil), no); got != "/tmp/kici-data" {
		t.Errorf("no env: %q", got)
	}

	// dirWritable on real directories.
	base := t.TempDir()
	if !dirWritable(filepath.Join(base, "a", "b")) {
		t.Error("creatable dir under a writable one should count as writable")
	}
	if os.Geteuid() != 0 {
		ro := filepath.Join(base, "ro")
		if err := os.Mkdir(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		if dirWritable(filepath.Join(ro, "kici")) {
			t.Error("dir under a read-only one should not be writable")
		}
	}
	f := filepath.Join(base, "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if dirWritable(f) {
		t.Error("a file is not a writable dir")
	}

	// KICI_DATA_DIR wins and is made absolute.
	c, err := Load([]string{"KICI_DATA_DIR=rel/dir"})
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(c.DataDir) || !strings.HasSuffix(c.DataDir, "rel/dir") {
		t.Errorf("DataDir = %q", c.DataDir)
	}
}

func TestEndpointFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if _, _, err := ReadLocalEndpoint(dir); err == nil || err.Error() != "no orchestrator found in "+dir+": start kici-orchestrator or pass --url/--token" {
		t.Fatalf("missing: %v", err)
	}
	if err := WriteLocalEndpoint(dir, "http://127.0.0.1:4123", os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadLocalEndpoint(dir); err == nil || !strings.Contains(err.Error(), "no admin token found") {
		t.Fatalf("missing token: %v", err)
	}
	if err := WriteAdminToken(dir, "kadm_abc"); err != nil {
		t.Fatal(err)
	}
	url, tok, err := ReadLocalEndpoint(dir)
	if err != nil || url != "http://127.0.0.1:4123" || tok != "kadm_abc" {
		t.Fatalf("got %q %q %v", url, tok, err)
	}
	for _, name := range []string{EndpointFile, AdminTokenFile} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", name, fi.Mode().Perm())
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("temp files left behind: %v", entries)
	}
	// Overwrite atomically.
	if err := WriteLocalEndpoint(dir, "http://127.0.0.1:5000", os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if url, _, _ := ReadLocalEndpoint(dir); url != "http://127.0.0.1:5000" {
		t.Fatalf("url after rewrite %q", url)
	}
	// Remove only our own file.
	if err := RemoveLocalEndpoint(dir, os.Getpid()+1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, EndpointFile)); err != nil {
		t.Fatal("file of another pid removed")
	}
	if err := RemoveLocalEndpoint(dir, os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadLocalEndpoint(dir); err == nil || !strings.Contains(err.Error(), "no orchestrator found") {
		t.Fatalf("after remove: %v", err)
	}
}

func TestEndpointDeadProcess(t *testing.T) {
	dir := t.TempDir()
	// A pid far above pid_max on Linux never exists.
	if err := WriteLocalEndpoint(dir, "http://127.0.0.1:1", 1<<30); err != nil {
		t.Fatal(err)
	}
	if err := WriteAdminToken(dir, "kadm_x"); err != nil {
		t.Fatal(err)
	}
	_, _, err := ReadLocalEndpoint(dir)
	if err == nil || !strings.Contains(err.Error(), "is not running): start kici-orchestrator or pass --url/--token") {
		t.Fatalf("err = %v", err)
	}
}

func TestSuggest(t *testing.T) {
	known := KnownNames()
	for in, want := range map[string]string{
		"KICI_FOO":         "",
		"KICI_DATADIR":     "KICI_DATA_DIR",
		"KICI_MAX_AGENT":   "KICI_MAX_AGENTS",
		"KICI_LOGLEVEL":    "KICI_LOG_LEVEL",
		"KICI_ADMIN_TOKNE": "KICI_ADMIN_TOKEN",
	} {
		if got := closestVar(in, known); got != want {
			t.Errorf("closestVar(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestConfigurationDoc(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "configuration.md")
	want := Markdown()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run: go test ./internal/config -run TestConfigurationDoc -update)", err)
	}
	if string(got) != want {
		t.Fatal("docs/configuration.md is stale: run go test ./internal/config -run TestConfigurationDoc -update")
	}
	for _, v := range Vars {
		if !strings.Contains(want, "`"+v.Name+"`") {
			t.Errorf("%s missing from the doc", v.Name)
		}
	}
}

func TestFindAgentBinary(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "kici-agent")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := FindAgentBinary(&Config{AgentBinary: exe}); err != nil || got != exe {
		t.Fatalf("explicit: %q %v", got, err)
	}
	t.Setenv("PATH", dir)
	if got, err := FindAgentBinary(&Config{AgentBinary: "kici-agent"}); err != nil || got != exe {
		t.Fatalf("on PATH: %q %v", got, err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := FindAgentBinary(&Config{AgentBinary: plain}); err == nil || !strings.Contains(err.Error(), "not an executable file") {
		t.Fatalf("not executable: %v", err)
	}
	if _, err := FindAgentBinary(&Config{AgentBinary: filepath.Join(dir, "missing")}); err == nil || !strings.Contains(err.Error(), "KICI_AGENT_BINARY") {
		t.Fatalf("missing: %v", err)
	}
}

// Step-log compression is allowed unless turned off: the nodes then
// compress only while every recent node reads compressed chunks
// (docs/upgrade.md); false is the way to never write them.
func TestStepLogCompressIsOnUnlessTurnedOff(t *testing.T) {
	for env, want := range map[string]bool{"": true, "KICI_STEP_LOG_COMPRESS=true": true, "KICI_STEP_LOG_COMPRESS=false": false} {
		c, err := Load([]string{"KICI_DATA_DIR=/x", env})
		if err != nil || c.StepLogCompress != want {
			t.Errorf("%q: StepLogCompress = %v, %v; want %v", env, c != nil && c.StepLogCompress, err, want)
		}
	}
}
