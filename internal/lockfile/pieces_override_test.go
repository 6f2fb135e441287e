package lockfile

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestPieceJobOverrides: a job that uses a job piece sets its own runsOn
// and if (replacing the piece's) and env (merged over the piece's, its
// values winning); the lock holds the result and names the overridden
// keys. An override is checked in the using file like any job's keys.
func TestPieceJobOverrides(t *testing.T) {
	piece := `piece: test
inputs:
  package: {type: string, default: ./...}
job:
  runsOn: [linux]
  if: event.branch != "wip"
  env: {PKG: "${{ with.package }}", MODE: piece, KEEP: piece}
  run: go test "$PKG"
`
	root := writeTree(t, map[string]string{
		".kici/pieces/test.yaml": piece,
		".kici/workflows/ci.yaml": `name: ci
on: push
jobs:
  lint:
    run: "true"
  plain:
    uses: ./.kici/pieces/test.yaml
  arm:
    uses: ./.kici/pieces/test.yaml
    needs: [lint]
    runsOn: {labels: [arm64], exclude: [slow]}
    if: needs.lint.result == "success"
    env: {MODE: arm, EXTRA: "${{ needs.lint.result }}"}
`,
	})
	lf, _, err := CompileDir(root)
	if err != nil {
		t.Fatal(err)
	}
	jobs := map[string]Job{}
	for _, j := range lf.Workflows[0].Jobs {
		jobs[j.Name] = j
	}
	plain, arm := jobs["plain"], jobs["arm"]
	if len(plain.PieceOverrides) != 0 || plain.If != `event.branch != "wip"` || plain.RunsOn[0].Value != "linux" {
		t.Fatalf("plain use = runsOn %+v if %q overrides %v", plain.RunsOn, plain.If, plain.PieceOverrides)
	}
	if len(arm.RunsOn) != 1 || arm.RunsOn[0].Value != "arm64" || len(arm.ExcludeLabels) != 1 || arm.ExcludeLabels[0].Value != "slow" {
		t.Errorf("arm runsOn = %+v exclude %+v, want the using job's", arm.RunsOn, arm.ExcludeLabels)
	}
	if arm.If != `needs.lint.result == "success"` {
		t.Errorf("arm if = %q, want the using job's", arm.If)
	}
	want := map[string]string{"PKG": "./...", "MODE": "arm", "KEEP": "piece", "EXTRA": "${{ needs.lint.result }}"}
	if !reflect.DeepEqual(arm.Env, want) {
		t.Errorf("arm env = %v, want %v (merged, the using job's values win)", arm.Env, want)
	}
	if !reflect.DeepEqual(arm.PieceOverrides, []string{"env", "if", "runsOn"}) {
		t.Errorf("arm pieceOverrides = %v", arm.PieceOverrides)
	}
	b := mustEncode(t, lf)
	var raw struct {
		Workflows []struct {
			Jobs []map[string]json.RawMessage `json:"jobs"`
		} `json:"workflows"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := json.Unmarshal(raw.Workflows[0].Jobs[2]["pieceOverrides"], &got); err != nil || !reflect.DeepEqual(got, []string{"env", "if", "runsOn"}) {
		t.Errorf("lock job arm pieceOverrides = %v (%v)", got, err)
	}

	// Overrides are checked in the using file, with the job's scope.
	for _, tc := range []struct{ job, want string }{
		{"    if: needs.other.result == \"success\"\n", `.kici/workflows/ci.yaml:6:9: if: needs.other`},
		{"    env: {\"1X\": y}\n", `.kici/workflows/ci.yaml:6:11: job a env: "1X" is not a valid environment variable name`},
		{"    timeout: 5m\n", `timeout`},
	} {
		root := writeTree(t, map[string]string{
			".kici/pieces/test.yaml":  piece,
			".kici/workflows/ci.yaml": "name: ci\non: push\njobs:\n  a:\n    uses: ./.kici/pieces/test.yaml\n" + tc.job,
		})
		_, _, err := CompileDir(root)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", strings.TrimSpace(tc.job), err, tc.want)
		}
	}
}
