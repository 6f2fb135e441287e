package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// defaultWeight is the expected duration of a test the weights file does
// not know (a new test): about the median of the package's tests.
const defaultWeight = 20 * time.Second

// partition splits tests into at most n shards of about equal expected
// duration: longest first, each to the shard with the least expected time
// so far (the LPT rule, within 4/3 of the best split). Names keep their
// order of the listing inside a shard.
func partition(tests []string, weights map[string]time.Duration, n int) [][]string {
	if n > len(tests) {
		n = len(tests)
	}
	order := append([]string(nil), tests...)
	weight := func(name string) time.Duration {
		if w, ok := weights[name]; ok {
			return w
		}
		return defaultWeight
	}
	sort.SliceStable(order, func(i, j int) bool { return weight(order[i]) > weight(order[j]) })
	load := make([]time.Duration, n)
	shardOf := map[string]int{}
	for _, name := range order {
		lightest := 0
		for s := range load {
			if load[s] < load[lightest] {
				lightest = s
			}
		}
		load[lightest] += weight(name)
		shardOf[name] = lightest
	}
	parts := make([][]string, n)
	for _, name := range tests {
		parts[shardOf[name]] = append(parts[shardOf[name]], name)
	}
	return parts
}

// readWeights reads `seconds TestName` lines; a missing file is no weights.
// Blank lines and lines starting with # are skipped.
func readWeights(path string) (map[string]time.Duration, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return map[string]time.Duration{}, nil
	}
	if err != nil {
		return nil, err
	}
	weights := map[string]time.Duration{}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		secs, err := strconv.ParseFloat(fields[0], 64)
		if len(fields) != 2 || err != nil || secs < 0 {
			return nil, fmt.Errorf("%s:%d: want `seconds TestName`, got %q", path, i+1, line)
		}
		weights[fields[1]] = time.Duration(secs * float64(time.Second))
	}
	return weights, nil
}

// writeWeights rewrites path with the measured durations, keeping the old
// weight of every test that did not run this time.
func writeWeights(path string, old, measured map[string]time.Duration) error {
	merged := map[string]time.Duration{}
	for k, v := range old {
		merged[k] = v
	}
	for k, v := range measured {
		merged[k] = v
	}
	names := make([]string, 0, len(merged))
	for k := range merged {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("# Expected durations of the e2e tests in seconds, for splitting them into\n")
	b.WriteString("# shards of equal length (scripts/e2eshard). Rewrite with `make e2e-durations`.\n")
	for _, k := range names {
		fmt.Fprintf(&b, "%.1f %s\n", merged[k].Seconds(), k)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

type shardSpec struct {
	index, of int
	bin, dir  string
	tests     []string
	timeout   time.Duration
	logPath   string
}

type shardResult struct {
	spec      shardSpec
	elapsed   time.Duration
	durations map[string]time.Duration
	failed    []string
	skipped   []string
	err       error
}

// summary is the shard's line in go test's shape: "ok  pkg  12.3s" or
// "FAIL  pkg  12.3s", with the shard and what was skipped.
func (r shardResult) summary(pkg string) string {
	verdict := "ok  "
	if r.err != nil {
		verdict = "FAIL"
	}
	line := fmt.Sprintf("%s\t%s (shard %d/%d, %d tests)\t%.1fs", verdict, pkg, r.spec.index, r.spec.of, len(r.spec.tests), r.elapsed.Seconds())
	if len(r.skipped) > 0 {
		line += fmt.Sprintf("\tskipped: %s", strings.Join(r.skipped, ", "))
	}
	if len(r.failed) > 0 {
		line += fmt.Sprintf("\tfailed: %s", strings.Join(r.failed, ", "))
	}
	if r.err != nil && len(r.failed) == 0 {
		line += "\t" + r.err.Error()
	}
	return line
}

// resultLine matches a top-level test's verdict in -test.v output.
var resultLine = regexp.MustCompile(`^--- (PASS|FAIL|SKIP): (Test\S*) \(([0-9.]+)s\)`)

// runShard runs one shard's tests verbosely into its log file, printing
// each top-level verdict as it comes and, at the end, the whole output of
// each failing test (or the log's tail when the binary died without one:
// a panic or the timeout).
func runShard(ctx context.Context, spec shardSpec, printMu *sync.Mutex) shardResult {
	res := shardResult{spec: spec, durations: map[string]time.Duration{}}
	logFile, err := os.Create(spec.logPath)
	if err != nil {
		res.err = err
		return res
	}
	defer logFile.Close()
	quoted := make([]string, len(spec.tests))
	for i, t := range spec.tests {
		quoted[i] = regexp.QuoteMeta(t)
	}
	cmd := exec.CommandContext(ctx, spec.bin, "-test.v", "-test.count", "1",
		"-test.timeout", spec.timeout.String(), "-test.run", "^("+strings.Join(quoted, "|")+")$")
	cmd.Dir = spec.dir
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		res.err = err
		return res
	}
	cmd.Stderr = cmd.Stdout
	start := time.Now()
	if err := cmd.Start(); err != nil {
		res.err = err
		return res
	}
	blocks := map[string][]string{}
	current := ""
	scanner := bufio.NewScanner(io.TeeReader(pipe, logFile))
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for scanner.Scan() {
		line := scanner.Text()
		if name, ok := strings.CutPrefix(line, "=== RUN   "); ok && !strings.Contains(name, "/") {
			current = name
		}
		if current != "" {
			blocks[current] = append(blocks[current], line)
		}
		m := resultLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		secs, _ := strconv.ParseFloat(m[3], 64)
		res.durations[m[2]] = time.Duration(secs * float64(time.Second))
		switch m[1] {
		case "FAIL":
			res.failed = append(res.failed, m[2])
		case "SKIP":
			res.skipped = append(res.skipped, m[2])
			delete(blocks, m[2])
		default:
			delete(blocks, m[2])
		}
		printMu.Lock()
		fmt.Printf("[e2e %d/%d] %s\n", spec.index, spec.of, line)
		printMu.Unlock()
	}
	err = cmd.Wait()
	res.elapsed = time.Since(start)
	if err != nil {
		res.err = err
	}
	printMu.Lock()
	defer printMu.Unlock()
	for _, name := range res.failed {
		fmt.Printf("\n[e2e %d/%d] output of %s:\n%s\n", spec.index, spec.of, name, strings.Join(blocks[name], "\n"))
	}
	if err != nil && len(res.failed) == 0 {
		lines := blocks[current]
		if len(lines) > 300 {
			lines = lines[len(lines)-300:]
		}
		fmt.Printf("\n[e2e %d/%d] the test binary ended with %v during %s; its last lines:\n%s\n", spec.index, spec.of, err, current, strings.Join(lines, "\n"))
	}
	return res
}
