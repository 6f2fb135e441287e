package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const routedWorkflow = `name: ml
on:
  push:
    branches: [main]
jobs:
  build:
    run: echo build
  train:
    runsOn: [gpu]
    run: echo train
`

// TestPreviewFlagsUnroutableJobs: `kici preview` flags a job whose runsOn
// no scaler label set (the embedded default, or --scalers) and no static
// agent (--labels) serves, and stops flagging it once one does.
func TestPreviewFlagsUnroutableJobs(t *testing.T) {
	bin := sharedKici(t)
	repo := newRepo(t, bin, map[string]string{"ml.yaml": routedWorkflow})
	preview := func(args ...string) PreviewOutput {
		t.Helper()
		out, stderr, code := runKici(t, bin, repo, append([]string{"preview", "push", "--branch", "main", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("preview %v: %d %s", args, code, stderr)
		}
		var got PreviewOutput
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return got
	}
	got := preview()
	if len(got.Unroutable) != 1 || !strings.Contains(got.Unroutable[0], "job train: runsOn [gpu] matches no scaler label set in the embedded default") ||
		!strings.Contains(got.Unroutable[0], "KICI_UNROUTABLE_GRACE_MS") {
		t.Fatalf("embedded default: %q", got.Unroutable)
	}
	dir := t.TempDir()
	cpuOnly := filepath.Join(dir, "cpu.yaml")
	gpu := filepath.Join(dir, "gpu.yaml")
	for p, labels := range map[string]string{cpuOnly: "[linux]", gpu: "[linux, gpu]"} {
		doc := "version: 1\nscalers:\n  - {name: pool, type: bare-metal, maxAgents: 2, labelSets: [{labels: " + labels + "}]}\n"
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got = preview("--scalers", cpuOnly)
	if len(got.Unroutable) != 1 || !strings.Contains(got.Unroutable[0], "cpu.yaml (and no --labels)") {
		t.Fatalf("cpu-only scalers: %q", got.Unroutable)
	}
	if got = preview("--scalers", gpu); len(got.Unroutable) != 0 {
		t.Fatalf("a gpu label set serves it: %q", got.Unroutable)
	}
	if got = preview("--scalers", cpuOnly, "--labels", "linux,docker", "--labels", "GPU,cuda"); len(got.Unroutable) != 0 {
		t.Fatalf("a static gpu agent serves it: %q", got.Unroutable)
	}
	out, _, _ := runKici(t, bin, repo, "preview", "push", "--branch", "main", "--labels", "linux")
	if !strings.Contains(out, "WARN ml: job train: runsOn [gpu]") || !strings.Contains(out, "and no --labels agent") {
		t.Fatalf("text preview:\n%s", out)
	}
	_, stderr, code := runKici(t, bin, repo, "preview", "push", "--branch", "main", "--scalers", filepath.Join(dir, "nope.yaml"))
	if code == 0 || !strings.Contains(stderr, "--scalers") {
		t.Fatalf("a missing scalers file: %d %s", code, stderr)
	}
}
