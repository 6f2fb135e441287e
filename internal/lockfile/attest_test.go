package lockfile

import (
	"reflect"
	"strings"
	"testing"
)

func TestStepAttest(t *testing.T) {
	src := `name: release
on: {push: {branches: [main]}}
jobs:
  build:
    runsOn: kici:os:linux
    steps:
      - run: make dist
        attest: [dist/app.tar.gz, dist/app.sbom.json]
      - run: make one
        attest: out/one.bin
`
	lf, err := Compile([]SourceFile{{Path: ".kici/workflows/release.yaml", Source: []byte(src)}})
	if err != nil {
		t.Fatal(err)
	}
	steps := lf.Workflows[0].Jobs[0].Steps
	if !reflect.DeepEqual(steps[0].Attest, []string{"dist/app.tar.gz", "dist/app.sbom.json"}) || !reflect.DeepEqual(steps[1].Attest, []string{"out/one.bin"}) {
		t.Fatalf("attest: %v %v", steps[0].Attest, steps[1].Attest)
	}
	for bad, want := range map[string]string{
		"attest: /etc/passwd": "must be relative",
		"attest: [../x]":      "must not leave",
		"attest: []":          "at least one file",
		`attest: [""]`:        "must not be empty",
		"attest: {a: b}":      "attest",
	} {
		_, err := Compile([]SourceFile{{Path: ".kici/workflows/w.yaml", Source: []byte(strings.Replace(src, "attest: out/one.bin", bad, 1))}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", bad, err, want)
		}
	}
}
