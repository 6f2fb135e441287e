package lockfile

import (
	"fmt"
	"regexp/syntax"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"kici.dev/kici/internal/trigger/pattern"
)

// globSyntax reports the first malformed construct of a glob: an unclosed
// character class `[`, a reversed range `[z-a]`, or an unclosed brace `{`.
// The matcher (picomatch rules) would read those characters literally, which
// is almost never what the author meant, so the compiler refuses them.
// It returns the 0-based byte offset and a message, or -1.
func globSyntax(s string) (int, string) {
	braces := []int{}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '[':
			j := i + 1
			if j < len(s) && (s[j] == '!' || s[j] == '^') {
				j++
			}
			if j < len(s) && s[j] == ']' {
				j++
			}
			end := strings.IndexByte(s[j:], ']')
			if end < 0 {
				return i, "unclosed character class `[` (write `\\[` for a literal bracket)"
			}
			class := s[j : j+end]
			if !strings.HasPrefix(class, "[:") {
				for k := 0; k+2 < len(class); k++ {
					if class[k+1] == '-' && class[k] > class[k+2] {
						return j + k, fmt.Sprintf("character class range %q is reversed", class[k:k+3])
					}
				}
			}
			i = j + end
		case '{':
			braces = append(braces, i)
		case '}':
			if len(braces) > 0 {
				braces = braces[:len(braces)-1]
			}
		}
	}
	if len(braces) > 0 {
		return braces[0], "unclosed brace `{` (write `\\{` for a literal brace)"
	}
	return -1, ""
}

// checkGlob reports a malformed glob at the position of the offending
// character inside node n (a scalar); it returns false when it reported.
func (f *yfile) checkGlob(n ast.Node, s, what string) bool {
	body := strings.TrimLeft(s, "!")
	skip := len(s) - len(body)
	if off, msg := globSyntax(body); off >= 0 {
		f.errorAt(n, skip+off, "%s: invalid glob %q: %s", what, s, msg)
		return false
	}
	if _, err := pattern.CompileGlob(body); err != nil {
		f.errorf(n, "%s: invalid glob %q: %v", what, s, strings.TrimPrefix(err.Error(), fmt.Sprintf("glob %q: ", body)))
		return false
	}
	return true
}

// checkRegex compiles a pattern regex and reports an error at the position
// of the offending fragment inside node n.
func (f *yfile) checkRegex(n ast.Node, src, flags, what string) bool {
	_, err := pattern.CompileRegex(strings.TrimPrefix(src, "!"), flags)
	if err == nil {
		return true
	}
	off := 0
	if _, perr := syntax.Parse(strings.TrimPrefix(src, "!"), syntax.Perl); perr != nil {
		if se, ok := perr.(*syntax.Error); ok && se.Expr != "" {
			if k := strings.Index(src, se.Expr); k >= 0 {
				off = k
			}
		}
	}
	f.errorAt(n, off, "%s: %v", what, err)
	return false
}

// errorAt reports at byte offset off inside the scalar n (one column more
// when the scalar is quoted). Multi-line scalars report at their start.
func (f *yfile) errorAt(n ast.Node, off int, format string, args ...any) {
	r := f.resolve(n)
	line, col := nodePos(r)
	if sn, ok := r.(*ast.StringNode); ok && sn.Token != nil && !strings.Contains(sn.Token.Origin, "\n") {
		if o := strings.TrimSpace(sn.Token.Origin); strings.HasPrefix(o, "\"") || strings.HasPrefix(o, "'") {
			col++
		}
		col += off
	}
	f.errs = append(f.errs, &CompileError{File: f.path, Line: line, Column: col, Msg: fmt.Sprintf(format, args...)})
}
