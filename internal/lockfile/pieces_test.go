package lockfile

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// writeTree writes files (path → content) under a new temporary root.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@e", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@e", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

const buildPiece = `piece: build
description: build and test one Go package
inputs:
  package: {type: string}
  race: {type: boolean, default: false}
  retries: {type: integer, default: 1, min: 1, max: 3}
job:
  description: build ${{ with.package }}
  env:
    PKG: ${{ with.package }}
    RACE: "${{ with.race }}"
  steps:
    - uses: ./.kici/pieces/setup.yaml
      with: {tool: go}
    - name: build
      run: go build "$PKG"
      retry: ${{ with.retries }}
  outputs:
    tool: setup.tool
`

const setupPiece = `piece: setup
inputs:
  tool: {type: enum, values: [go, node]}
steps:
  - name: setup
    run: echo "tool=${{ with.tool }}" >> "$KICI_OUTPUT"
`

// TestPiecesFromTheRepository expands a job piece that itself uses a step
// piece, with typed inputs, defaults and a declared output, and records
// each piece's origin and content hash in the lock.
func TestPiecesFromTheRepository(t *testing.T) {
	root := writeTree(t, map[string]string{
		".kici/pieces/build.yaml": buildPiece,
		".kici/pieces/setup.yaml": setupPiece,
		".kici/workflows/ci.yaml": `name: ci
on: push
jobs:
  lint:
    run: "true"
  build:
    uses: ./.kici/pieces/build.yaml
    needs: [lint]
    with: {package: ./cmd/app, race: true, retries: 2}
  after:
    needs: [build]
    steps:
      - uses: ./.kici/pieces/setup.yaml
        with: {tool: node}
      - name: show
        env: {T: "${{ needs.build.outputs.tool }}"}
        run: echo "$T"
`,
	})
	lf, _, err := CompileDir(root)
	if err != nil {
		t.Fatal(err)
	}
	wf := lf.Workflows[0]
	b := wf.Jobs[1]
	if b.Name != "build" || b.Description != "build ./cmd/app" || b.Env["PKG"] != "./cmd/app" || b.Env["RACE"] != "true" {
		t.Fatalf("build job = %+v", b)
	}
	if len(b.Needs) != 1 || b.Needs[0].Name != "lint" || b.Outputs["tool"] != "setup.tool" {
		t.Fatalf("needs/outputs = %+v %+v", b.Needs, b.Outputs)
	}
	if len(b.Steps) != 2 || b.Steps[0].Run != `echo "tool=go" >> "$KICI_OUTPUT"` || b.Steps[1].Retry.MaxAttempts != 2 {
		t.Fatalf("steps = %+v", b.Steps)
	}
	if loc := b.Steps[0].SourceLocation; loc.File != ".kici/pieces/setup.yaml" || loc.Line != 5 {
		t.Fatalf("piece step location = %+v", loc)
	}
	if a := wf.Jobs[2]; a.Steps[0].Run != `echo "tool=node" >> "$KICI_OUTPUT"` || a.Steps[1].Name != "show" {
		t.Fatalf("after = %+v", a.Steps)
	}
	if len(wf.Pieces) != 2 || wf.Pieces[0].File != ".kici/pieces/build.yaml" || len(wf.Pieces[0].ContentHash) != 64 || wf.Pieces[0].Commit != "" {
		t.Fatalf("pieces = %+v", wf.Pieces)
	}
	if err := os.WriteFile(filepath.Join(root, Path), mustEncode(t, lf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Check(root); err != nil {
		t.Fatalf("fresh lock: %v", err)
	}
	// Editing the piece is drift: kici compile --check and the run-time
	// check (the agent's DriftCheck) both see it.
	if err := os.WriteFile(filepath.Join(root, ".kici/pieces/setup.yaml"), []byte(strings.Replace(setupPiece, "echo", "printf '%s\\n'", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	err = Check(root)
	if !errors.Is(err, ErrStale) || !strings.Contains(err.Error(), `workflow "ci": piece .kici/pieces/setup.yaml changed`) {
		t.Fatalf("check after edit = %v", err)
	}
	if msg := NewDriftCheck(&wf).Verify(root); !strings.Contains(msg, "piece .kici/pieces/setup.yaml, used by .kici/workflows/ci.yaml, does not match") {
		t.Fatalf("drift check = %q", msg)
	}
}

func mustEncode(t *testing.T, lf *LockFile) []byte {
	t.Helper()
	b, err := Encode(lf)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPiecesFromALibrary reads a piece of another git repository at a tag;
// moving the tag to a changed piece shows as drift naming both commits,
// while a workflow pinned to the full commit does not drift.
func TestPiecesFromALibrary(t *testing.T) {
	t.Setenv("KICI_LIBRARY_CACHE", t.TempDir())
	lib := writeTree(t, map[string]string{"pieces/test.yaml": "piece: test\ninputs:\n  what: {type: string, default: all}\nsteps:\n  - name: test\n    run: echo test ${{ with.what }}\n"})
	gitRun(t, lib, "init", "-q", "-b", "main")
	gitRun(t, lib, "add", "-A")
	gitRun(t, lib, "commit", "-qm", "v1")
	gitRun(t, lib, "tag", "v1")
	c1 := gitRun(t, lib, "rev-parse", "HEAD")
	user := func(ref string) string {
		return writeTree(t, map[string]string{".kici/workflows/ci.yaml": "name: ci\non: push\nlibraries:\n  shared: {git: " + lib + ", ref: " + ref + "}\njobs:\n  t:\n    steps:\n      - uses: shared:pieces/test.yaml\n"})
	}
	byTag, byCommit := user("v1"), user(c1)
	for _, root := range []string{byTag, byCommit} {
		lf, data, err := CompileDir(root)
		if err != nil {
			t.Fatal(err)
		}
		p := lf.Workflows[0].Pieces[0]
		if p.Library != "shared" || p.Commit != c1 || p.File != "pieces/test.yaml" || lf.Workflows[0].Jobs[0].Steps[0].Run != "echo test all" {
			t.Fatalf("lock = %+v %+v", p, lf.Workflows[0].Jobs[0].Steps)
		}
		if lf.Workflows[0].Jobs[0].Steps[0].SourceLocation.File != "shared:pieces/test.yaml" {
			t.Fatalf("location = %+v", lf.Workflows[0].Jobs[0].Steps[0].SourceLocation)
		}
		if err := os.WriteFile(filepath.Join(root, Path), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(lib, "pieces/test.yaml"), []byte("piece: test\nsteps:\n  - name: test\n    run: echo changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitRun(t, lib, "commit", "-qam", "v1 moved")
	gitRun(t, lib, "tag", "-f", "v1")
	c2 := gitRun(t, lib, "rev-parse", "HEAD")
	err := Check(byTag)
	want := `library shared ref v1 now resolves to ` + c2[:12] + `; the lock has ` + c1[:12]
	if !errors.Is(err, ErrStale) || !strings.Contains(err.Error(), want) {
		t.Fatalf("check of the tag user = %v, want %q", err, want)
	}
	if err := Check(byCommit); err != nil {
		t.Fatalf("a commit pin drifted: %v", err)
	}
}

// TestPiecesErrors: each error names the file it is in with line and
// column, errors inside a piece also name the using file, and cycles are
// refused with their path.
func TestPiecesErrors(t *testing.T) {
	wfUses := func(uses, with string) string {
		return "name: ci\non: push\njobs:\n  a:\n    uses: " + uses + "\n" + with
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"cycle", map[string]string{
			".kici/workflows/ci.yaml": wfUses("./p/a.yaml", ""),
			"p/a.yaml":                "piece: a\njob:\n  steps:\n    - uses: ./p/b.yaml\n",
			"p/b.yaml":                "piece: b\nsteps:\n  - uses: ./p/c.yaml\n",
			"p/c.yaml":                "piece: c\nsteps:\n  - uses: ./p/b.yaml\n",
		}, "p/c.yaml:3:11: pieces form a cycle: p/b.yaml → p/c.yaml → p/b.yaml (used by p/b.yaml:3:11)"},
		{"unknown input", map[string]string{
			".kici/workflows/ci.yaml": wfUses("./p/a.yaml", "    with: {colour: red}\n"),
			"p/a.yaml":                "piece: a\njob:\n  run: \"true\"\n",
		}, ".kici/workflows/ci.yaml:6:12: with.colour: piece p/a.yaml has no input \"colour\""},
		{"missing input", map[string]string{
			".kici/workflows/ci.yaml": wfUses("./p/a.yaml", ""),
			"p/a.yaml":                "piece: a\ninputs:\n  n: {type: integer}\njob:\n  run: \"true\"\n",
		}, ".kici/workflows/ci.yaml:5:11: piece p/a.yaml needs input \"n\""},
		{"wrong type", map[string]string{
			".kici/workflows/ci.yaml": wfUses("./p/a.yaml", "    with: {n: lots}\n"),
			"p/a.yaml":                "piece: a\ninputs:\n  n: {type: integer}\njob:\n  run: \"true\"\n",
		}, ".kici/workflows/ci.yaml:6:15: with.n:"},
		{"undeclared reference", map[string]string{
			".kici/workflows/ci.yaml": wfUses("./p/a.yaml", ""),
			"p/a.yaml":                "piece: a\njob:\n  env: {X: \"${{ with.nope }}\"}\n  run: \"true\"\n",
		}, "p/a.yaml:3:13: ${{ with.nope }}: the piece declares no input \"nope\""},
		{"error inside piece", map[string]string{
			".kici/workflows/ci.yaml": wfUses("./p/a.yaml", ""),
			"p/a.yaml":                "piece: a\njob:\n  timeout: forever\n  run: \"true\"\n",
		}, "p/a.yaml:3:12: "},
		{"piece declares needs", map[string]string{
			".kici/workflows/ci.yaml": wfUses("./p/a.yaml", ""),
			"p/a.yaml":                "piece: a\njob:\n  needs: [x]\n  run: \"true\"\n",
		}, "p/a.yaml:3:3: a job piece cannot declare `needs`"},
		{"missing file", map[string]string{".kici/workflows/ci.yaml": wfUses("./p/none.yaml", "")}, ".kici/workflows/ci.yaml:5:11: uses \"./p/none.yaml\": p/none.yaml: no such piece file"},
		{"escaping path", map[string]string{".kici/workflows/ci.yaml": wfUses("./../x.yaml", "")}, "must not have empty, . or .. segments"},
		{"unknown library", map[string]string{".kici/workflows/ci.yaml": wfUses("lib:x.yaml", "")}, `no library "lib"`},
		{"steps piece as job", map[string]string{
			".kici/workflows/ci.yaml": wfUses("./p/s.yaml", ""),
			"p/s.yaml":                "piece: s\nsteps:\n  - run: \"true\"\n",
		}, "p/s.yaml:2:1: this piece defines `steps`, but it is used as a job piece"},
		{"bad library url", map[string]string{".kici/workflows/ci.yaml": "name: ci\non: push\nlibraries:\n  l: {git: 'ext::sh -c evil', ref: v1}\njobs:\n  a:\n    run: \"true\"\n"}, "a library URL must be https://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := CompileDir(writeTree(t, tc.files))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}
