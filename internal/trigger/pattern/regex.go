package pattern

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
)

// MaxRegexRepetitions is the safe-regex repetition limit (KiCI
// lockfile-redos-guard.ts uses safe-regex's default of 25).
const MaxRegexRepetitions = 25

// CompileRegex compiles a JavaScript regular expression (source and flags,
// as in `new RegExp(source, flags)`) to a Go regexp with the same unanchored
// `test()` semantics. Supported flags: i, m, s (mapped to RE2 flags), y
// (sticky: anchored at the start), and g, d, u, v (no effect on a single
// test). Lookaround assertions and backreferences have no RE2 equivalent and
// are rejected with an error that says so; `\uXXXX` escapes are translated.
// CompileRegex never panics.
func CompileRegex(source, flags string) (*regexp.Regexp, error) {
	goSrc, err := TranslateRegex(source, flags)
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(goSrc)
	if err != nil {
		return nil, fmt.Errorf("invalid regex /%s/%s: %v", source, flags, unwrapSyntax(err))
	}
	return re, nil
}

// TranslateRegex returns the Go (RE2) source equivalent to the JavaScript
// regex /source/flags, or an error for unsupported syntax or flags.
func TranslateRegex(source, flags string) (string, error) {
	var goFlags string
	sticky := false
	seen := map[rune]bool{}
	for _, f := range flags {
		if seen[f] {
			return "", fmt.Errorf("invalid regex flags %q: duplicate flag %q", flags, f)
		}
		seen[f] = true
		switch f {
		case 'i', 'm', 's':
			goFlags += string(f)
		case 'y':
			sticky = true
		case 'g', 'd', 'u', 'v':
		default:
			return "", fmt.Errorf("invalid regex flags %q: unknown flag %q", flags, f)
		}
	}
	body, err := translateBody(source)
	if err != nil {
		return "", fmt.Errorf("regex /%s/%s: %w", source, flags, err)
	}
	if sticky {
		body = `\A(?:` + body + `)`
	}
	if goFlags != "" {
		body = "(?" + goFlags + ")" + body
	}
	return body, nil
}

func translateBody(src string) (string, error) {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\\':
			if i+1 >= len(src) {
				return "", fmt.Errorf("trailing backslash")
			}
			n := src[i+1]
			switch {
			case !inClass && n >= '1' && n <= '9':
				return "", fmt.Errorf("backreferences (\\%c) are not supported: kici evaluates regexes with Go's RE2 engine", n)
			case !inClass && n == 'k' && i+2 < len(src) && src[i+2] == '<':
				return "", fmt.Errorf("named backreferences (\\k<name>) are not supported: kici evaluates regexes with Go's RE2 engine")
			case n == 'u' && i+5 < len(src) && isHex(src[i+2:i+6]):
				b.WriteString(`\x{` + src[i+2:i+6] + `}`)
				i += 5
				continue
			case n == 'u' && i+2 < len(src) && src[i+2] == '{':
				end := strings.IndexByte(src[i:], '}')
				if end < 0 {
					return "", fmt.Errorf("unterminated \\u{...} escape")
				}
				b.WriteString(`\x{` + src[i+3:i+end] + `}`)
				i += end
				continue
			case n == '/':
				b.WriteString("/")
				i++
				continue
			}
			b.WriteByte(c)
			b.WriteByte(n)
			i++
		case inClass:
			if c == ']' {
				inClass = false
			}
			b.WriteByte(c)
		case c == '[':
			inClass = true
			b.WriteByte(c)
			if strings.HasPrefix(src[i+1:], "^]") {
				return "", fmt.Errorf("the JavaScript class [^] is not supported; use [\\s\\S]")
			}
		case strings.HasPrefix(src[i:], "(?=") || strings.HasPrefix(src[i:], "(?!"):
			return "", fmt.Errorf("lookahead assertions (%s...) are not supported: kici evaluates regexes with Go's RE2 engine", src[i:i+3])
		case c == '(' && (strings.HasPrefix(src[i:], "(?<=") || strings.HasPrefix(src[i:], "(?<!")):
			return "", fmt.Errorf("lookbehind assertions (%s...) are not supported: kici evaluates regexes with Go's RE2 engine", src[i:i+4])
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func unwrapSyntax(err error) error {
	if se, ok := err.(*syntax.Error); ok {
		return fmt.Errorf("%s: `%s`", se.Code, se.Expr)
	}
	return err
}

// CheckSafeRegex applies the safe-regex rule KiCI uses for label matchers
// (star height at most 1 and at most MaxRegexRepetitions repetition
// operators; `*`, `+`, `?` and `{n,m}` all count). It also rejects source that
// CompileRegex cannot compile. The returned error describes why.
func CheckSafeRegex(source, flags string) error {
	goSrc, err := TranslateRegex(source, flags)
	if err != nil {
		return err
	}
	re, err := syntax.Parse(goSrc, syntax.Perl)
	if err != nil {
		return fmt.Errorf("invalid regex /%s/%s: %v", source, flags, unwrapSyntax(err))
	}
	reps := 0
	var walk func(r *syntax.Regexp, height int) error
	walk = func(r *syntax.Regexp, height int) error {
		switch r.Op {
		case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
			height++
			reps++
			if height > 1 {
				return fmt.Errorf("regex /%s/%s is ReDoS-prone: nested repetition (star height > 1)", source, flags)
			}
			if reps > MaxRegexRepetitions {
				return fmt.Errorf("regex /%s/%s is ReDoS-prone: more than %d repetitions", source, flags, MaxRegexRepetitions)
			}
		}
		for _, s := range r.Sub {
			if err := walk(s, height); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(re, 0)
}
