package lockfile

import (
	"slices"
	"strings"
	"testing"
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
	if len(b.Artifacts) != 1 || b.Artifacts[0].Name != "bin" || !slices.Contains(b.Artifacts[0].When, "failed") {
		t.Fatalf("artifacts = %+v", b.Artifacts)
	}
	if b.Container == nil || b.Container.Image != "kici-test/go:1" || b.Container.Env["A"] != "1" {
		t.Fatalf("container = %+v", b.Container)
	}
	if len(b.Services) != 2 || b.Services[0].Name != "db" || b.Services[0].Health.Interval != 1000 || b.Services[1].Image != "redis:7" {
		t.Fatalf("services = %+v", b.Services)
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
		"container: {options: ['--user=1']}":                        "needs an image",
		"services: {Bad_Name: x}":                                   "DNS label",
		"services: {db: {env: {A: b}}}":                             "needs an image",
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
