package pattern

import (
	"fmt"
	"strings"
)

// ValidateGlob returns why p is not an acceptable stored glob (nil when it
// is): it does not compile with CompileGlob, or its brackets or braces do
// not pair up. The pairing check matters for globs an operator stores
// (context names, repository patterns, binding patterns) because the
// compiler, like picomatch, reads an unclosed "[" or "{" as a literal
// character, so "[abc" would be stored and then silently never match.
func ValidateGlob(p string) error {
	if msg := unbalancedGlob(p); msg != "" {
		return fmt.Errorf("glob %q: %s", p, msg)
	}
	if _, err := CompileGlob(p); err != nil {
		return err
	}
	return nil
}

// unbalancedGlob reports an unclosed "[" or "{" or a stray "]" or "}" in
// glob p ("" when they pair up). A backslash escapes the next character;
// inside a class a leading "]" and POSIX classes such as [:alpha:] are
// literal parts of the class, as in CompileGlob.
func unbalancedGlob(p string) string {
	braces := 0
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '[':
			j := i + 1
			if j < len(p) && (p[j] == '!' || p[j] == '^') {
				j++
			}
			if j < len(p) && p[j] == ']' {
				j++
			}
			closed := false
			for ; j < len(p) && !closed; j++ {
				switch {
				case p[j] == '\\':
					j++
				case p[j] == '[' && j+1 < len(p) && p[j+1] == ':':
					if end := strings.Index(p[j:], ":]"); end >= 0 {
						j += end + 1
					}
				case p[j] == ']':
					closed = true
					j-- // the loop's j++ must leave j on the ']'
				}
			}
			if !closed {
				return `unclosed "[" (write \[ for a literal bracket)`
			}
			i = j
		case ']':
			return `unmatched "]"`
		case '{':
			braces++
		case '}':
			if braces == 0 {
				return `unmatched "}"`
			}
			braces--
		}
	}
	if braces > 0 {
		return `unclosed "{"`
	}
	return ""
}
