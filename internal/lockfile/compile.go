package lockfile

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"kici.dev/kici/internal/pieces"
)

// CompileDir compiles every `<root>/.kici/workflows/*.yaml` (and *.yml)
// file, sorted by file name, into a lock file, and returns it together with
// its encoding (see Encode). Workflow problems are returned as CompileErrors
// (each with File:Line:Column); I/O problems as plain errors.
func CompileDir(root string) (*LockFile, []byte, error) {
	dir := filepath.Join(root, filepath.FromSlash(WorkflowDir))
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil, fmt.Errorf("no workflow directory %s (run `kici init` to create one)", WorkflowDir)
		}
		return nil, nil, fmt.Errorf("read %s: %w", WorkflowDir, err)
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, ".") || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			continue
		}
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("no workflow files (*.yaml) in %s (run `kici init` to create one)", WorkflowDir)
	}
	files := make([]SourceFile, 0, len(names))
	for _, n := range names {
		path := filepath.Join(dir, n)
		if fi, err := os.Stat(path); err == nil && fi.Size() > MaxWorkflowFileSize {
			return nil, nil, CompileErrors{{File: WorkflowDir + "/" + n, Line: 1, Column: 1,
				Msg: fmt.Sprintf("file is %d bytes; a workflow file may be at most %d bytes", fi.Size(), MaxWorkflowFileSize)}}
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, fmt.Errorf("read workflow: %w", err)
		}
		files = append(files, SourceFile{Path: WorkflowDir + "/" + n, Source: src})
	}
	lf, err := CompileWith(files, dirPieces{pieces.NewResolver(root)})
	if err != nil {
		return nil, nil, err
	}
	data, err := Encode(lf)
	if err != nil {
		return nil, nil, err
	}
	if len(data) > MaxLockSize {
		return nil, nil, fmt.Errorf("the compiled lock file would be %d bytes, over the %d byte limit the orchestrator accepts: split or shrink the workflows (YAML anchors repeated many times expand in the lock)", len(data), MaxLockSize)
	}
	return lf, data, nil
}

// MaxWorkflowFileSize caps one workflow YAML file: 1 MiB.
const MaxWorkflowFileSize = 1 << 20

// SourceFile is one workflow file given to Compile: its repo-relative path
// (forward slashes) and its raw bytes.
type SourceFile struct {
	Path   string
	Source []byte
}

// Compile compiles workflow files, in the given order, into a lock file with
// its contentHash set. It returns CompileErrors when any file is invalid,
// including duplicate workflow names across files.
func Compile(files []SourceFile) (*LockFile, error) { return CompileWith(files, nil) }

// CompileWith is Compile with a reader of piece files for `uses:`; with a
// nil reader a `uses:` is an error.
func CompileWith(files []SourceFile, reader PieceReader) (*LockFile, error) {
	lf := &LockFile{
		SchemaVersion: SchemaVersion,
		Source:        SourceRef{File: WorkflowDir, Export: "#default"},
		Workflows:     []Workflow{},
	}
	var errs CompileErrors
	seen := map[string]string{}
	for _, sf := range files {
		wf, nameNode, ferrs := compileFile(sf, reader)
		errs = append(errs, ferrs...)
		if wf == nil {
			continue
		}
		if prev, dup := seen[wf.Name]; dup {
			line, col := nodePos(nameNode)
			if nameNode == nil {
				line, col = 1, 1
			}
			errs = append(errs, &CompileError{File: sf.Path, Line: line, Column: col,
				Msg: fmt.Sprintf("duplicate workflow name %q (also defined in %s)", wf.Name, prev)})
			continue
		}
		seen[wf.Name] = sf.Path
		lf.Workflows = append(lf.Workflows, *wf)
	}
	if len(errs) > 0 {
		sortErrors(errs)
		return nil, errs
	}
	if len(lf.Workflows) > 0 {
		lf.Source = lf.Workflows[0].Source
	}
	h, err := ContentHash(lf)
	if err != nil {
		return nil, err
	}
	lf.ContentHash = h
	return lf, nil
}

// compileFile compiles one workflow file. It returns the workflow (nil when
// the file has errors), the node of its `name` (for duplicate reports) and
// the errors.
func compileFile(sf SourceFile, reader PieceReader) (*Workflow, ast.Node, CompileErrors) {
	f := &yfile{path: sf.Path, pieces: &pieceState{reader: reader}, useStack: []string{sf.Path}}
	body := f.parseYAML(sf.Source)
	if body == nil {
		return nil, nil, f.errs
	}
	entries, ok := f.mapping(body, "a workflow")
	if !ok {
		return nil, nil, f.errs
	}
	f.strict(entries, "workflow", "name", "description", "on", "timeout", "concurrency", "env", "jobs", "drift", "libraries")
	base := filepath.Base(sf.Path)
	wf := &Workflow{
		Name:                 strings.TrimSuffix(strings.TrimSuffix(base, ".yaml"), ".yml"),
		Source:               SourceRef{File: sf.Path, Export: "#default"},
		ContentHash:          WorkflowContentHash(sf.Source),
		CompileSchemaVersion: CompileSchemaVersion,
		Triggers:             []Trigger{},
		Jobs:                 []Job{},
	}
	var nameNode, jobsNode ast.Node
	var env map[string]string
	for _, e := range entries {
		switch e.key {
		case "name":
			nameNode = e.val
			if s, ok := f.nonEmptyStr(e.val, "workflow name"); ok {
				wf.Name = s
			}
		case "description":
			if s, ok := f.str(e.val, "description"); ok {
				wf.Description = s
			}
		case "on":
			wf.Triggers = f.triggers(e.val)
		case "timeout":
			if ms, ok := f.duration(e.val, "workflow timeout"); ok {
				wf.Timeout = ms
			}
		case "concurrency":
			wf.Concurrency = f.concurrency(e.val)
		case "env":
			env = f.envMap(e.val, "workflow env")
		case "jobs":
			jobsNode = e.val
		case "drift":
			wf.Drift = f.drift(e.val)
		case "libraries":
			f.pieces.libs = f.libraries(e.val)
		}
	}
	if nameNode == nil {
		nameNode = body
	}
	if jobsNode == nil {
		f.errorf(body, "workflow has no jobs (add a `jobs:` mapping)")
	} else {
		f.inputNames = inputNames(wf.Triggers)
		f.inputTypes = InputTypes(wf.Triggers)
		wf.Jobs = f.jobs(jobsNode, env)
		wf.Pieces = f.pieces.used
	}
	if len(f.errs) > 0 {
		return nil, nameNode, f.errs
	}
	return wf, nameNode, nil
}

func (f *yfile) concurrency(n ast.Node) *Concurrency {
	if s, ok := f.scalar(n); ok {
		if strings.TrimSpace(s) == "" {
			f.errorf(n, "concurrency group must not be empty")
			return nil
		}
		return &Concurrency{HasGroup: true, Group: s}
	}
	entries, ok := f.mapping(n, "concurrency")
	if !ok {
		return nil
	}
	f.strict(entries, "concurrency", "group", "cancelInProgress", "max")
	c := &Concurrency{}
	for _, e := range entries {
		switch e.key {
		case "group":
			if s, ok := f.nonEmptyStr(e.val, "concurrency group"); ok {
				c.Group, c.HasGroup = s, true
			}
		case "cancelInProgress":
			if b, ok := f.boolean(e.val, "cancelInProgress"); ok {
				c.CancelInProgress = &b
			}
		case "max":
			if v, ok := f.intRange(e.val, "concurrency max", 1, 1000); ok {
				c.Max = v
			}
		}
	}
	return c
}
