package lockfile

import (
	"fmt"
	"strings"
)

// CompileError is one problem found while compiling a YAML workflow. File is
// repo-relative (e.g. ".kici/workflows/ci.yaml"); Line and Column are
// 1-based (0 when unknown).
type CompileError struct {
	File   string
	Line   int
	Column int
	Msg    string
}

// Error formats the error as "file:line:column: message".
func (e *CompileError) Error() string {
	switch {
	case e.Line > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
	case e.File != "":
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return e.Msg
}

// CompileErrors is the list of problems CompileDir found, in file then
// position order. It is returned as the error of a failed compile.
type CompileErrors []*CompileError

// Error joins the errors one per line.
func (es CompileErrors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap exposes the individual errors to errors.Is / errors.As.
func (es CompileErrors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// ParseError is returned by Parse for a lock document that cannot be used.
// Context names the workflow/job/field when known.
type ParseError struct {
	Context string
	Msg     string
}

// Error formats the error as "lock file: <context>: <message>".
func (e *ParseError) Error() string {
	if e.Context == "" {
		return "lock file: " + e.Msg
	}
	return "lock file: " + e.Context + ": " + e.Msg
}
