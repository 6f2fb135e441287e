package lockfile

import (
	"slices"
	"strings"
	"testing"

	"kici.dev/kici/internal/runs/status"
)

func TestCompileJobBlobs(t *testing.T) {
	src := `name: w
on: {push: {}}
jobs:
  build:
    cache:
      - key: go-${{ kici.os }}-${{ hashFiles('go.sum', '**/go.mod') }}
        paths: [~/.cache/go-build, ~/go/pkg/mod]
        restoreKeys: ['go-${{ kici.os }}-']
    artifacts:
      - name: bin
        paths: ["bin/**", "!bin/*.tmp"]
        when: always
    container: {image: "kici-test/go:1", env: {A: "1"}, options: ["--user=1000"]}
    services:
      db:
        image: postgres:16
        env: {POSTGRES_PASSWORD: x}
        health: {cmd: [pg_isready], interval: 1s, retries: 30}
        ports: [5432, 5433]
      cache: redis:7
    run: make
  test:
    needs: [build]
    download: [bin]
    run: ./bin/x
`
	lf, err := Compile([]SourceFile{{Path: ".kici/workflows/w.yaml", Source: []byte(src)}})
	if err != nil {
		t.Fatal(err)
	}
	b, tj := lf.Workflows[0].Jobs[0], lf.Workflows[0].Jobs[1]
	if len(b.Cache) != 1 || b.Cache[0].Paths[1] != "~/go/pkg/mod" || b.Cache[0].RestoreKeys[0] != "go-${{ kici.os }}-" {
		t.Fatalf("cache = %+v", b.Cache)
	}
	if len(b.Artifacts) != 1 || b.Artifacts[0].Name != "bin" || !slices.Contains(b.Artifacts[0].When, status.JobFailed) {
		t.Fatalf("artifacts = %+v", b.Artifacts)
	}
	if b.Container == nil || b.Container.Image != "kici-test/go:1" || b.Container.Env["A"] != "1" {
		t.Fatalf("container = %+v", b.Container)
	}
	if len(b.Services) != 2 || b.Services[0].Name != "db" || b.Services[0].Health.Interval != 1000 || b.Services[1].Image != "redis:7" {
		t.Fatalf("services = %+v", b.Services)
	}
	if !slices.Equal(b.Services[0].Ports, []int{5432, 5433}) || b.Services[1].Ports != nil {
		t.Fatalf("service ports = %v, %v", b.Services[0].Ports, b.Services[1].Ports)
	}
	if len(tj.Download) != 1 || tj.Download[0] != "bin" {
		t.Fatalf("download = %v", tj.Download)
	}
	key, err := ExpandCacheKey(b.Cache[0].Key, func(fn string, args []string) (string, error) {
		return fn + "(" + strings.Join(args, "|") + ")", nil
	})
	if err != nil || key != "go-os()-hashFiles(go.sum|**/go.mod)" {
		t.Fatalf("expand = %q, %v", key, err)
	}
}

func TestCompileJobBlobsErrors(t *testing.T) {
	cases := map[string]string{
		"cache: [{key: 'k-${{ env.HOME }}', paths: [a]}]":          "unknown expression",
		"cache: [{key: 'k-${{ hashFiles(go.sum) }}', paths: [a]}]": "quoted globs",
		"cache: [{key: k}]":                                         "needs a key and paths",
		"cache: [{key: k, paths: [a], ttl: 1}]":                     `unknown key "ttl"`,
		"artifacts: [{name: '../x', paths: [a]}]":                   "letters, digits",
		"artifacts: [{name: a, paths: [x]}, {name: a, paths: [y]}]": "declared twice",
		"container: {image: x, options: ['--privileged']}":          "is not allowed",
		"container: {options: ['--user=1']}":                        "needs an image or a build",
		"services: {Bad_Name: x}":                                   "DNS label",
		"services: {db: {env: {A: b}}}":                             "needs an image",
		"services: {db: {image: x, ports: [0]}}":                    "between 1 and 65535",
		"services: {db: {image: x, ports: [70000]}}":                "between 1 and 65535",
		"services: {db: {image: x, ports: [web]}}":                  "must be an integer",
		"services: {db: {image: x, ports: [80, 80]}}":               "listed twice",
		"download: [bin]":                                           "no job in needs declares that artifact",
	}
	for field, want := range cases {
		src := "name: w\non: {push: {}}\njobs:\n  j:\n    " + field + "\n    run: x\n"
		_, err := Compile([]SourceFile{{Path: ".kici/workflows/w.yaml", Source: []byte(src)}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", field, err, want)
		}
	}
}

// The cache-path attack of a workflow author: a cache naming the
// orchestrator's data directory (read by the agent, restored elsewhere) or
// a root-owned directory (written on restore) is a compile error naming
// the path, the file and the line; paths inside the job's workspace, HOME
// and private /tmp compile.
func TestCompileCachePathsOutsideTheJobRefused(t *testing.T) {
	refused := map[string]string{
		"/var/lib/kici":          "outside the job's workspace, HOME and /tmp",
		"/etc/cron.d":            "outside the job's workspace, HOME and /tmp",
		"../../.kici-data":       `".." is not allowed`,
		"~/../../var/lib/kici":   `".." is not allowed`,
		"/tmp/../etc":            `".." is not allowed`,
		"~root/.ssh":             "not another user's",
		"$HOME/.cache":           "variables are not expanded",
		"node_modules/../../etc": `".." is not allowed`,
	}
	for p, want := range refused {
		src := "name: w\non: {push: {}}\njobs:\n  j:\n    cache:\n      - key: k\n        paths:\n          - ok\n          - '" + p + "'\n    run: x\n"
		_, err := Compile([]SourceFile{{Path: ".kici/workflows/w.yaml", Source: []byte(src)}})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), ".kici/workflows/w.yaml:9") {
			t.Errorf("cache path %s: err = %v, want %q at w.yaml:9", p, err, want)
		}
	}
	for _, p := range []string{"/data", "../x", "~/y"} {
		src := "name: w\non: {push: {}}\njobs:\n  j:\n    artifacts: [{name: a, paths: ['" + p + "']}]\n    run: x\n"
		_, err := Compile([]SourceFile{{Path: ".kici/workflows/w.yaml", Source: []byte(src)}})
		if err == nil || !strings.Contains(err.Error(), "artifact path") || !strings.Contains(err.Error(), p) {
			t.Errorf("artifact path %s: err = %v", p, err)
		}
	}
	ok := "name: w\non: {push: {}}\njobs:\n  j:\n    cache:\n      - key: k\n        paths: [.deps, node_modules, vendor, .venv, target, ~/.cache/go-build, ~/go/pkg/mod, '~', /tmp/build, ./sub/dir]\n    run: x\n"
	if _, err := Compile([]SourceFile{{Path: ".kici/workflows/w.yaml", Source: []byte(ok)}}); err != nil {
		t.Fatalf("paths inside the job refused: %v", err)
	}
	for p, want := range map[string][2]string{
		".deps": {"workspace", ".deps"}, "./a/b/": {"workspace", "a/b"}, ".": {"workspace", ""},
		"~": {"home", ""}, "~/.cache/go-build": {"home", ".cache/go-build"}, "/tmp/x": {"tmp", "x"},
	} {
		base, rel, err := SplitCachePath(p)
		if err != nil || string(base) != want[0] || rel != want[1] {
			t.Errorf("SplitCachePath(%q) = %s, %q, %v; want %v", p, base, rel, err, want)
		}
	}
}

// The example of docs/caches-and-artifacts.md "Which paths a cache may
// hold" compiles.
func TestDocsCachePathsExampleCompiles(t *testing.T) {
	src := docExample(t, "caches-and-artifacts.md", "### Which paths a cache may hold")
	lf, err := Compile([]SourceFile{{Path: ".kici/workflows/deps.yaml", Source: []byte(src)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := lf.Workflows[0].Jobs[0].Cache[0].Paths; len(got) != 3 || got[0] != ".deps" {
		t.Fatalf("paths = %q", got)
	}
}
