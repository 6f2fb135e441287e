package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// benchWorkflows are the workflows of the benchmark repository, one per
// scenario, each triggered by pushes to its own branches.
func benchWorkflows(logLines, fanLegs int) map[string]string {
	return map[string]string{
		// park: jobs no agent can take, to fill the queue.
		"park.yaml": `name: park
on:
  push:
    branches: ["park-*"]
jobs:
  parked:
    runsOn: bench-nobody
    steps:
      - run: "true"
`,
		// parkfan: parkLegs parked jobs per delivery, for the queue curve.
		"parkfan.yaml": fmt.Sprintf(`name: parkfan
on:
  push:
    branches: ["parkfan-*"]
jobs:
  parked:
    runsOn: bench-nobody
    matrix: [%s]
    steps:
      - run: "true"
`, matrixLegs(parkLegs)),
		// curve: one job for the protocol client that takes jobs.
		"curve.yaml": `name: curve
on:
  push:
    branches: [curve]
jobs:
  take:
    runsOn: bench-worker
    steps:
      - run: "true"
`,
		// lat and trivial: one job, one trivial step, after a checkout.
		"lat.yaml": `name: lat
on:
  push:
    branches: ["lat", "triv-*"]
jobs:
  one:
    steps:
      - run: "true"
`,
		// stat: the lat job for static agents (runsOn no scaler label set
		// serves, so only the benchmark's own kici-agent processes take it).
		"stat.yaml": `name: stat
on:
  push:
    branches: ["stat", "stat-*"]
jobs:
  one:
    runsOn: ` + staticLabel + `
    steps:
      - run: "true"
`,
		"fan.yaml": `name: fan
on:
  push:
    branches: [fan]
jobs:
  leg:
    matrix: [` + matrixLegs(fanLegs) + `]
    steps:
      - run: "true"
`,
		"log.yaml": fmt.Sprintf(`name: log
on:
  push:
    branches: [log]
jobs:
  print:
    steps:
      - run: seq 1 %d
`, logLines),
	}
}

// makeRepo creates the benchmark repository with its compiled lock and
// returns its path and head commit.
func makeRepo(bin, dir string, logLines, fanLegs int) (string, error) {
	if _, err := gitRun(dir, "init", "-q", "-b", "main"); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(dir, ".kici", "workflows"), 0o755); err != nil {
		return "", err
	}
	for name, body := range benchWorkflows(logLines, fanLegs) {
		if err := os.WriteFile(filepath.Join(dir, ".kici", "workflows", name), []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	// A few files so a checkout has something to write.
	for i := 0; i < 20; i++ {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file-%02d.txt", i)), []byte(strings.Repeat("kici bench\n", 200)), 0o644); err != nil {
			return "", err
		}
	}
	cmd := exec.Command(filepath.Join(bin, "kici"), "compile")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("kici compile: %v: %s", err, out)
	}
	if _, err := gitRun(dir, "add", "-A"); err != nil {
		return "", err
	}
	if _, err := gitRun(dir, "commit", "-qm", "bench"); err != nil {
		return "", err
	}
	return gitRun(dir, "rev-parse", "HEAD")
}

// matrixLegs is a flow-style list of n quoted leg names.
func matrixLegs(n int) string {
	legs := make([]string, n)
	for i := range legs {
		legs[i] = fmt.Sprintf("%q", fmt.Sprint(i))
	}
	return strings.Join(legs, ", ")
}
