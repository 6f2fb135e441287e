package lockfile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"

	"kici.dev/kici/internal/pieces"
)

// Reusable pieces: a job or a step sequence defined in a piece file of the
// repository (`uses: ./path.yaml`) or of a library repository pinned in the
// workflow's `libraries:` (`uses: <library>:<path>`), expanded into the
// lock at compile time. See docs/workflows.md "Reusable pieces".

// MaxPieceDepth bounds how deeply pieces may use pieces.
const MaxPieceDepth = 8

// Library is one `libraries:` entry of a workflow: a git repository and the
// ref (branch, tag or full commit id) its pieces are read at.
type Library struct {
	Name string
	Git  string
	Ref  string
}

// PieceOrigin records, in the lock, one piece a workflow used: where it
// came from and what it resolved to, so a run is reproducible and a change
// upstream shows as drift (kici).
type PieceOrigin struct {
	// File is the piece file, relative to its repository.
	File string `json:"file"`
	// Library, Git and Ref name the library; empty for a file of the
	// workflow's own repository.
	Library string `json:"library,omitempty"`
	Git     string `json:"git,omitempty"`
	Ref     string `json:"ref,omitempty"`
	// Commit is the library commit Ref resolved to at compile.
	Commit string `json:"commit,omitempty"`
	// ContentHash is sha256 of the piece file's bytes, hex.
	ContentHash string `json:"contentHash"`
}

// Label is how errors and step source locations name the piece file:
// "<path>" in the repository, "<library>:<path>" in a library.
func (p PieceOrigin) Label() string {
	if p.Library == "" {
		return p.File
	}
	return p.Library + ":" + p.File
}

// PieceReader reads piece files for the compiler. Compile has none (a
// `uses` is then an error); CompileDir reads through internal/pieces.
type PieceReader interface {
	// Local reads a file of the repository being compiled.
	Local(path string) ([]byte, error)
	// Library reads a file of library git at ref and returns the commit
	// ref resolved to.
	Library(git, ref, path string) ([]byte, string, error)
}

// dirPieces adapts pieces.Resolver to PieceReader.
type dirPieces struct{ r *pieces.Resolver }

func (d dirPieces) Local(p string) ([]byte, error) {
	f, err := d.r.Local(p)
	if err != nil {
		return nil, err
	}
	return f.Data, nil
}

func (d dirPieces) Library(git, ref, p string) ([]byte, string, error) {
	f, err := d.r.Library(context.Background(), git, ref, p)
	if err != nil {
		return nil, "", err
	}
	return f.Data, f.Commit, nil
}

// pieceState is shared by a workflow file and every piece it expands.
type pieceState struct {
	reader PieceReader
	libs   map[string]*Library
	used   []PieceOrigin
}

// libraries decodes a workflow's `libraries:` mapping.
func (f *yfile) libraries(n ast.Node) map[string]*Library {
	entries, ok := f.mapping(n, "libraries")
	if !ok {
		return nil
	}
	out := map[string]*Library{}
	for _, e := range entries {
		w := "libraries." + e.key
		if msg := checkJobName(e.key); msg != "" || strings.ContainsAny(e.key, ":/") {
			f.errorf(e.knode, "library name %q must be a plain name (letters, digits, - and _)", e.key)
			continue
		}
		fields, ok := f.mapping(e.val, w)
		if !ok {
			continue
		}
		f.strict(fields, w, "git", "ref")
		lib := &Library{Name: e.key}
		for _, fe := range fields {
			switch fe.key {
			case "git":
				if s, ok := f.nonEmptyStr(fe.val, w+".git"); ok {
					if msg := pieces.CheckURL(s); msg != "" {
						f.errorf(fe.val, "%s.git: %s", w, msg)
					}
					lib.Git = s
				}
			case "ref":
				lib.Ref, _ = f.nonEmptyStr(fe.val, w+".ref")
			}
		}
		if lib.Git == "" || lib.Ref == "" {
			f.errorf(e.val, "%s needs `git` (the repository URL) and `ref` (a tag, branch or full commit id)", w)
			continue
		}
		out[e.key] = lib
	}
	return out
}

// hasKey reports whether n is a mapping with key (without reporting errors).
func (f *yfile) hasKey(n ast.Node, key string) bool {
	m, ok := f.resolve(n).(*ast.MappingNode)
	if !ok {
		return false
	}
	for _, v := range m.Values {
		if v.Key != nil && v.Key.GetToken() != nil && v.Key.GetToken().Value == key {
			return true
		}
	}
	return false
}

// withRefRE finds `${{ with.NAME }}` references in piece text.
var withRefRE = regexp.MustCompile(`\$\{\{\s*with\.([A-Za-z_][A-Za-z0-9_-]*)\s*\}\}`)

// substituteWith replaces the `${{ with.NAME }}` references of s with the
// values of the piece's use (names were checked when the piece was loaded).
func (f *yfile) substituteWith(s string) string {
	if f.with == nil || !strings.Contains(s, "${{") {
		return s
	}
	return withRefRE.ReplaceAllStringFunc(s, func(m string) string {
		name := withRefRE.FindStringSubmatch(m)[1]
		if v, ok := f.with[name]; ok {
			return v
		}
		return m
	})
}

// loadPiece resolves the `uses` at usesNode, checks its `with` values
// against the piece's typed inputs and returns the piece's walker and the
// node of its `job` (kind "job") or `steps` (kind "steps"); nil when it
// cannot be used (the errors are recorded).
func (f *yfile) loadPiece(usesNode, withNode ast.Node, kind string) (*yfile, ast.Node) {
	ref, ok := f.nonEmptyStr(usesNode, "uses")
	if !ok {
		return nil, nil
	}
	if f.pieces == nil || f.pieces.reader == nil {
		f.errorf(usesNode, "uses: pieces are read from the repository; compile with `kici compile` inside it")
		return nil, nil
	}
	origin := PieceOrigin{}
	var lib *Library
	switch {
	case strings.HasPrefix(ref, "./"):
		origin.File = strings.TrimPrefix(ref, "./")
		lib = f.lib
	case strings.Contains(ref, ":"):
		name, p, _ := strings.Cut(ref, ":")
		if f.lib != nil {
			f.errorf(usesNode, "uses %q: a library piece may only use pieces of its own library (./path)", ref)
			return nil, nil
		}
		lib = f.pieces.libs[name]
		if lib == nil {
			f.errorf(usesNode, "uses %q: no library %q in this workflow's `libraries:`", ref, name)
			return nil, nil
		}
		origin.File = p
	default:
		f.errorf(usesNode, "uses %q: write ./<path> for a file of this repository or <library>:<path> for a library piece", ref)
		return nil, nil
	}
	if msg := pieces.CleanPath(origin.File); msg != "" {
		f.errorf(usesNode, "uses: %s", msg)
		return nil, nil
	}
	var data []byte
	var err error
	if lib != nil {
		origin.Library, origin.Git, origin.Ref = lib.Name, lib.Git, lib.Ref
		data, origin.Commit, err = f.pieces.reader.Library(lib.Git, lib.Ref, origin.File)
	} else {
		data, err = f.pieces.reader.Local(origin.File)
	}
	label := origin.Label()
	if i := slices.Index(f.useStack, label); i >= 0 {
		f.errorf(usesNode, "pieces form a cycle: %s", strings.Join(append(slices.Clone(f.useStack[i:]), label), " → "))
		return nil, nil
	}
	if len(f.useStack) > MaxPieceDepth {
		f.errorf(usesNode, "pieces nest more than %d deep: %s", MaxPieceDepth, strings.Join(append(slices.Clone(f.useStack), label), " → "))
		return nil, nil
	}
	if err != nil {
		f.errorf(usesNode, "uses %q: %v", ref, err)
		return nil, nil
	}
	sum := sha256.Sum256(data)
	origin.ContentHash = hex.EncodeToString(sum[:])
	if !slices.ContainsFunc(f.pieces.used, func(o PieceOrigin) bool { return o.Label() == label }) {
		f.pieces.used = append(f.pieces.used, origin)
	}

	pf := &yfile{path: label, pieces: f.pieces, lib: lib, useStack: append(slices.Clone(f.useStack), label),
		inputNames: f.inputNames, inputTypes: f.inputTypes}
	content, descs := pf.parsePiece(data, kind)
	// Every ${{ with.X }} of the piece names a declared input.
	for _, m := range withRefRE.FindAllSubmatchIndex(data, -1) {
		name := string(data[m[2]:m[3]])
		if _, ok := descs[name]; !ok {
			line, col := offsetPos(data, m[0])
			pf.errs = append(pf.errs, &CompileError{File: label, Line: line, Column: col,
				Msg: fmt.Sprintf("${{ with.%s }}: the piece declares no input %q (add it under `inputs:`)", name, name)})
		}
	}
	pf.with = f.withValues(withNode, usesNode, label, descs)
	if len(pf.errs) == 0 {
		// A number or boolean input written as a whole value
		// (`retry: ${{ with.n }}`) keeps its YAML type.
		if typed := substituteTyped(data, descs, pf.with); typed != nil {
			content, _ = pf.parsePiece(typed, kind)
		}
	}
	if len(pf.errs) > 0 || content == nil {
		f.absorb(pf, usesNode)
		return nil, nil
	}
	return pf, content
}

// parsePiece parses a piece file and returns the node of its `job` or
// `steps` (nil when missing or wrong) and its typed inputs.
func (pf *yfile) parsePiece(data []byte, kind string) (ast.Node, map[string]InputDescriptor) {
	body := pf.parseYAML(data)
	if body == nil {
		return nil, nil
	}
	entries, ok := pf.mapping(body, "a piece")
	if !ok {
		return nil, nil
	}
	pf.strict(entries, "piece", "piece", "description", "inputs", "job", "steps")
	var content ast.Node
	var descs map[string]InputDescriptor
	hasName := false
	kindName := map[string]string{"job": "job", "steps": "step"}
	for _, e := range entries {
		switch e.key {
		case "piece":
			_, hasName = pf.nonEmptyStr(e.val, "piece")
		case "description":
			pf.str(e.val, "description")
		case "inputs":
			if raw := pf.inputs(e.val, "piece inputs"); raw != nil {
				_ = json.Unmarshal(raw, &descs)
			}
		case "job", "steps":
			if e.key != kind {
				pf.errorf(e.knode, "this piece defines `%s`, but it is used as a %s piece", e.key, kindName[kind])
				continue
			}
			content = e.val
		}
	}
	if !hasName {
		pf.errorf(body, "a piece file starts with `piece: <name>` (then inputs, and job or steps)")
	}
	if content == nil && len(pf.errs) == 0 {
		pf.errorf(body, "this piece has no `%s`, so it cannot be used as a %s piece", kind, kindName[kind])
	}
	return content, descs
}

// typedRefRE finds a `${{ with.X }}` that is a whole plain YAML value.
var typedRefRE = regexp.MustCompile(`(?m)((?::|-)[ \t]+)\$\{\{\s*with\.([A-Za-z_][A-Za-z0-9_-]*)\s*\}\}[ \t]*$`)

// substituteTyped returns data with each whole-value reference to a
// number, integer or boolean input replaced by its value (digits, a dot, a
// sign, true or false: nothing that can change the YAML structure), or nil
// when there is none.
func substituteTyped(data []byte, descs map[string]InputDescriptor, with map[string]string) []byte {
	changed := false
	out := typedRefRE.ReplaceAllFunc(data, func(m []byte) []byte {
		sm := typedRefRE.FindSubmatch(m)
		d, ok := descs[string(sm[2])]
		if !ok || (d.Type != InputNumber && d.Type != InputInteger && d.Type != InputBoolean) {
			return m
		}
		changed = true
		return append(append([]byte{}, sm[1]...), with[string(sm[2])]...)
	})
	if !changed {
		return nil
	}
	return out
}

// offsetPos returns the 1-based line and column of byte offset off.
func offsetPos(data []byte, off int) (int, int) {
	before := string(data[:off])
	return 1 + strings.Count(before, "\n"), off - strings.LastIndex(before, "\n")
}

// withValues decodes the `with:` of a use (in the using file) against the
// piece's typed inputs: unknown names, values of the wrong type and missing
// required inputs are errors; defaults fill the rest.
func (f *yfile) withValues(withNode, usesNode ast.Node, label string, descs map[string]InputDescriptor) map[string]string {
	out := map[string]string{}
	given := map[string]bool{}
	if withNode != nil {
		entries, _ := f.mapping(withNode, "with")
		for _, e := range entries {
			d, ok := descs[e.key]
			if !ok {
				names := make([]string, 0, len(descs))
				for k := range descs {
					names = append(names, k)
				}
				slices.Sort(names)
				f.errorf(e.knode, "with.%s: piece %s has no input %q (inputs: %s)", e.key, label, e.key, strings.Join(names, ", "))
				continue
			}
			var v any
			if err := yaml.NodeToValue(f.resolve(e.val), &v); err != nil {
				f.errorf(e.val, "with.%s: %v", e.key, err)
				continue
			}
			if s, ok := v.(string); ok {
				v = f.substituteWith(s)
			}
			cv, err := d.Coerce(v)
			if err != nil {
				f.errorf(e.val, "with.%s: %v", e.key, err)
				continue
			}
			out[e.key] = withString(cv)
			given[e.key] = true
		}
	}
	for name, d := range descs {
		if given[name] {
			continue
		}
		switch {
		case d.HasDefault:
			out[name] = withString(d.Default)
		case d.Optional:
			out[name] = ""
		default:
			f.errorf(usesNode, "piece %s needs input %q (add it under `with:`)", label, name)
		}
	}
	return out
}

// withString is the text a typed input value is substituted as.
func withString(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case bool:
		return strconv.FormatBool(t)
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	case int:
		return strconv.Itoa(t)
	case int64:
		return strconv.FormatInt(t, 10)
	case uint64:
		return strconv.FormatUint(t, 10)
	}
	return fmt.Sprint(v)
}

// absorb moves a piece's errors into f, each naming where it was used.
func (f *yfile) absorb(pf *yfile, usesNode ast.Node) {
	line, col := nodePos(usesNode)
	for _, e := range pf.errs {
		if !strings.Contains(e.Msg, "(used by ") {
			e.Msg += fmt.Sprintf(" (used by %s:%d:%d)", f.path, line, col)
		}
		f.errs = append(f.errs, e)
	}
	pf.errs = nil
}

// usedJob decodes a job written as `uses:` a job piece: the using entry
// gives `with` and `needs`, and may override the piece job's `runsOn` and
// `if` (replaced) and `env` (merged, the using job's values win); the
// piece gives everything else. The overridden keys are recorded in
// Job.PieceOverrides.
func (f *yfile) usedJob(name string, knode, n ast.Node, wfEnv map[string]string) (Job, []needRef) {
	j := Job{Type: JobStatic, Name: name, RunsOn: []LabelMatcher{}, Needs: []Need{}, Steps: []Step{}}
	what := "job " + name
	entries, ok := f.mapping(n, what)
	if !ok {
		return j, nil
	}
	f.strict(entries, what+" (a job that uses a piece)", "uses", "with", "needs", "runsOn", "if", "env")
	var usesNode, withNode, runsOnNode, ifNode, envNode ast.Node
	needs, refs := []Need{}, []needRef(nil)
	for _, e := range entries {
		switch e.key {
		case "uses":
			usesNode = e.val
		case "with":
			withNode = e.val
		case "needs":
			needs, refs = f.needs(e.val, what+" needs")
		case "runsOn":
			runsOnNode = e.val
		case "if":
			ifNode = e.val
		case "env":
			envNode = e.val
		}
	}
	j.Needs = needs
	pf, body := f.loadPiece(usesNode, withNode, "job")
	if pf == nil {
		return j, refs
	}
	pf.presetNeeds, pf.presetRefs, pf.hasPreset = needs, refs, true
	pj, _ := pf.job(name, body, body, wfEnv)
	f.absorb(pf, usesNode)
	f.overridePieceJob(&pj, refs, runsOnNode, ifNode, envNode)
	return pj, refs
}

// overridePieceJob applies the using job's runsOn, if and env to the job
// a piece defined, decoded in the using file (so errors name it) with the
// job's needs and matrix in scope.
func (f *yfile) overridePieceJob(j *Job, refs []needRef, runsOnNode, ifNode, envNode ast.Node) {
	if runsOnNode == nil && ifNode == nil && envNode == nil {
		return
	}
	what := "job " + j.Name
	f.inJob = true
	var env map[string]string
	if envNode != nil {
		env = f.envMap(envNode, what+" env") // templates checked by beginJob
	}
	f.beginJob(j, refs)
	defer func() { f.scope, f.inJob = nil, false }()
	if runsOnNode != nil {
		o := Job{RunsOn: []LabelMatcher{}, RunsOnPick: "deterministic"}
		f.runsOn(&o, runsOnNode, what+" runsOn")
		j.RunsOn, j.ExcludeLabels, j.RunsOnPick = o.RunsOn, o.ExcludeLabels, o.RunsOnPick
		j.PieceOverrides = append(j.PieceOverrides, "runsOn")
	}
	if ifNode != nil {
		if s, ok := f.nonEmptyStr(ifNode, what+" if"); ok {
			f.checkCondition(ifNode, s, f.scope.sc)
			j.If = s
		}
		j.PieceOverrides = append(j.PieceOverrides, "if")
	}
	if envNode != nil {
		if j.Env == nil && len(env) > 0 {
			j.Env = make(map[string]string, len(env))
		}
		for k, v := range env {
			j.Env[k] = v
		}
		j.PieceOverrides = append(j.PieceOverrides, "env")
	}
	slices.Sort(j.PieceOverrides)
}

// usedSteps decodes a steps entry written as `uses:` a step piece.
func (f *yfile) usedSteps(it ast.Node, what string) []Step {
	entries, ok := f.mapping(it, what)
	if !ok {
		return nil
	}
	f.strict(entries, what+" (a step that uses a piece)", "uses", "with")
	var usesNode, withNode ast.Node
	for _, e := range entries {
		switch e.key {
		case "uses":
			usesNode = e.val
		case "with":
			withNode = e.val
		}
	}
	pf, body := f.loadPiece(usesNode, withNode, "steps")
	if pf == nil {
		return nil
	}
	pf.scope, pf.inJob = f.scope, f.inJob
	st := pf.steps(body, what+" (piece "+pf.path+")")
	f.absorb(pf, usesNode)
	return st
}
