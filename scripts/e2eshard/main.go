// Command e2eshard runs the e2e test package as several concurrent
// processes of one test binary, so the longest package of `make test` takes
// about half its serial time on two cores: most of an e2e test's wall time is
// spent waiting on the processes it starts (orchestrators, agents, git,
// Docker, Chromium), not on the CPU.
//
// It compiles the package once, lists its top-level tests, splits them into
// shards of about equal expected duration (longest first, each to the
// lightest shard; durations from the weights file, which -record rewrites
// from a run), runs the shards at once and prints, per shard, each test's
// result and time, the full output of every failing test, and a summary line
// per shard in `go test`'s shape. The exit code is 1 when any shard fails.
//
// Usage (from the repository root):
//
//	go run ./scripts/e2eshard [-shards 2] [-timeout 20m] [-run REGEXP] [-record]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

func main() {
	shards := flag.Int("shards", 2, "number of concurrent test processes")
	timeout := flag.Duration("timeout", 20*time.Minute, "bound on each shard's run (go test's -timeout)")
	pkg := flag.String("pkg", "./e2e", "the package to run, relative to the repository root")
	weights := flag.String("weights", "e2e/testdata/durations.txt", "expected test durations, one `seconds TestName` per line")
	runRe := flag.String("run", "", "run only top-level tests matching this regular expression (go test's -run)")
	record := flag.Bool("record", false, "after the run, rewrite the weights file with the measured durations")
	flag.Parse()
	if *shards < 1 {
		fmt.Fprintln(os.Stderr, "e2eshard: -shards must be at least 1")
		os.Exit(2)
	}
	if err := run(*pkg, *weights, *runRe, *shards, *timeout, *record); err != nil {
		fmt.Fprintln(os.Stderr, "e2eshard:", err)
		os.Exit(1)
	}
}

func run(pkg, weightsPath, runRe string, shards int, timeout time.Duration, record bool) error {
	tmp, err := os.MkdirTemp("", "kici-e2eshard-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "e2e.test")
	build := exec.Command("go", "test", "-c", "-o", bin, pkg)
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("compiling %s: %w", pkg, err)
	}
	pattern := ".*"
	if runRe != "" {
		pattern = runRe
	}
	list := exec.Command(bin, "-test.list", pattern)
	list.Dir = pkg
	out, err := list.Output()
	if err != nil {
		return fmt.Errorf("listing the tests of %s: %w", pkg, err)
	}
	tests := topLevelTests(string(out))
	if len(tests) == 0 {
		return fmt.Errorf("no test of %s matches %q", pkg, pattern)
	}
	known, err := readWeights(weightsPath)
	if err != nil {
		return err
	}
	parts := partition(tests, known, shards)

	results := make([]shardResult, len(parts))
	var printMu sync.Mutex
	var wg sync.WaitGroup
	for i, names := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = runShard(context.Background(), shardSpec{
				index: i + 1, of: len(parts), bin: bin, dir: pkg, tests: names,
				timeout: timeout, logPath: filepath.Join(tmp, fmt.Sprintf("shard-%d.log", i+1)),
			}, &printMu)
		}()
	}
	wg.Wait()

	failed := false
	for _, r := range results {
		if r.err != nil {
			failed = true
		}
		fmt.Println(r.summary(pkg))
	}
	if record {
		measured := map[string]time.Duration{}
		for _, r := range results {
			for name, d := range r.durations {
				measured[name] = d
			}
		}
		if err := writeWeights(weightsPath, known, measured); err != nil {
			return err
		}
		fmt.Printf("e2eshard: wrote %d durations to %s\n", len(measured), weightsPath)
	}
	if failed {
		return fmt.Errorf("%s failed", pkg)
	}
	return nil
}

// topLevelTests returns the Test* names of `-test.list` output (which also
// lists benchmarks, examples and fuzz targets).
func topLevelTests(listing string) []string {
	var tests []string
	for _, l := range strings.Split(listing, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "Test") {
			tests = append(tests, l)
		}
	}
	return tests
}
