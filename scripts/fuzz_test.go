package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMakeFuzzRunsEveryTarget: `make fuzz` explores every fuzz target in
// the repository, each with a bounded minimization time (go test's default
// of 60 s per new input stalls targets with large inputs: FuzzParse made a
// few dozen executions in 30 s).
func TestMakeFuzzRunsEveryTarget(t *testing.T) {
	out, err := exec.Command("make", "-s", "--no-print-directory", "-C", "..", "-n", "fuzz").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n fuzz: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for _, l := range lines {
		if !strings.Contains(l, "-fuzzminimizetime ") {
			t.Errorf("fuzz command without a bounded minimization: %s", l)
		}
	}
	fuzzRe := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(f \*testing\.F\)`)
	found := 0
	err = filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		pkg := "./" + filepath.ToSlash(filepath.Dir(strings.TrimPrefix(path, "../")))
		for _, m := range fuzzRe.FindAllStringSubmatch(string(b), -1) {
			found++
			want := "-fuzz '^" + m[1] + "$'"
			ok := false
			for _, l := range lines {
				if strings.Contains(l, " "+pkg+" ") && strings.Contains(l, want) {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s %s is not run by make fuzz", pkg, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 6 {
		t.Fatalf("found %d fuzz targets, want at least the 6 known ones", found)
	}
}
