// Package pattern implements the pattern languages of kici triggers and label
// matchers: picomatch-compatible globs and JavaScript-style regular
// expressions restricted to what Go's RE2 engine can run.
//
// Glob semantics follow picomatch 4 with default options (KiCI
// packages/engine/src/trigger/matcher.ts):
//   - `*` and `?` never match `/`;
//   - `**` as a whole path segment matches zero or more segments
//     (`release/**` matches `release`);
//   - a path segment that starts with `.` is only matched by a pattern
//     segment that starts with a literal `.` (`*`, `?`, `**`, classes and
//     extglobs never match a leading dot);
//   - braces `{a,b}` and numeric/letter ranges `{1..3}`, classes `[a-z]`,
//     `[!x]`, POSIX classes `[[:alpha:]]`, extglobs `@(a|b)`, `?(…)`, `+(…)`,
//     `*(…)`; `!(…)` is rejected because it cannot be expressed without
//     lookahead;
//   - matching is case-sensitive, a leading `./` is ignored, and a leading `!`
//     negates the whole pattern.
package pattern

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// maxBraceExpansion bounds how many alternatives brace expansion may produce.
const maxBraceExpansion = 1024

// Glob is a compiled glob pattern. The zero value is not usable; use
// CompileGlob.
type Glob struct {
	src     string
	negated bool
	alts    [][]segment
}

// segment is one `/`-separated piece of an expanded pattern.
type segment struct {
	globstar bool
	// literalDot reports that the pattern segment starts with a literal '.',
	// which is the only way to match a value segment starting with '.'.
	literalDot bool
	re         *regexp.Regexp
}

// CompileGlob parses a picomatch-style glob. It returns an error for
// malformed patterns (unclosed class or extglob, negated extglob `!(…)`,
// too many brace alternatives).
func CompileGlob(pattern string) (*Glob, error) {
	g := &Glob{src: pattern}
	p := pattern
	for strings.HasPrefix(p, "!") && !strings.HasPrefix(p, "!(") {
		g.negated = !g.negated
		p = p[1:]
	}
	p = strings.TrimPrefix(p, "./")
	expanded, err := expandBraces(p)
	if err != nil {
		return nil, fmt.Errorf("glob %q: %w", pattern, err)
	}
	for _, e := range expanded {
		segs, err := compileSegments(e)
		if err != nil {
			return nil, fmt.Errorf("glob %q: %w", pattern, err)
		}
		g.alts = append(g.alts, segs)
	}
	return g, nil
}

// String returns the pattern text as given to CompileGlob.
func (g *Glob) String() string { return g.src }

// Match reports whether value matches the glob. A leading "./" on value is
// ignored; the empty string never matches a non-negated glob.
func (g *Glob) Match(value string) bool {
	value = strings.TrimPrefix(value, "./")
	m := false
	if value != "" {
		vs := strings.Split(value, "/")
		for _, alt := range g.alts {
			if matchSegments(alt, vs) {
				m = true
				break
			}
		}
	}
	if g.negated {
		return !m
	}
	return m
}

func matchSegments(pat []segment, vals []string) bool {
	// Iterative-with-memo is unnecessary for the short inputs we see, but
	// collapse consecutive globstars to keep the recursion linear-ish.
	if len(pat) == 0 {
		return len(vals) == 0
	}
	p := pat[0]
	if p.globstar {
		rest := pat[1:]
		for len(rest) > 0 && rest[0].globstar {
			rest = rest[1:]
		}
		// zero segments
		if matchSegments(rest, vals) {
			return true
		}
		for i := range vals {
			if !globstarSegmentOK(vals[i]) {
				return false
			}
			if matchSegments(rest, vals[i+1:]) {
				return true
			}
		}
		return false
	}
	if len(vals) == 0 {
		return false
	}
	v := vals[0]
	if strings.HasPrefix(v, ".") && !p.literalDot {
		return false
	}
	if !p.re.MatchString(v) {
		return false
	}
	return matchSegments(pat[1:], vals[1:])
}

func globstarSegmentOK(v string) bool {
	return v != "" && !strings.HasPrefix(v, ".")
}

func compileSegments(p string) ([]segment, error) {
	parts := splitSegments(p)
	segs := make([]segment, 0, len(parts))
	for _, part := range parts {
		if part == "**" {
			if len(segs) > 0 && segs[len(segs)-1].globstar {
				continue
			}
			segs = append(segs, segment{globstar: true})
			continue
		}
		body, err := segmentRegex(part)
		if err != nil {
			return nil, err
		}
		re, err := regexp.Compile("^(?:" + body + ")$")
		if err != nil {
			return nil, fmt.Errorf("segment %q: %v", part, err)
		}
		segs = append(segs, segment{literalDot: strings.HasPrefix(part, "."), re: re})
	}
	return segs, nil
}

// splitSegments splits on '/' outside of [...] classes and (...) groups.
func splitSegments(p string) []string {
	var out []string
	depth, inClass := 0, false
	start := 0
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\':
			i++
		case inClass:
			if c == ']' {
				inClass = false
			}
		case c == '[':
			inClass = true
			if i+1 < len(p) && (p[i+1] == '!' || p[i+1] == '^') {
				i++
			}
			if i+1 < len(p) && p[i+1] == ']' {
				i++
			}
		case c == '(':
			depth++
		case c == ')':
			if depth > 0 {
				depth--
			}
		case c == '/' && depth == 0:
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return append(out, p[start:])
}

// segmentRegex converts one glob segment (no '/') to an RE2 regex body.
func segmentRegex(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\':
			if i+1 < len(s) {
				i++
				b.WriteString(regexp.QuoteMeta(s[i : i+1]))
			} else {
				b.WriteString(`\\`)
			}
		case '*', '?', '+', '@', '!':
			if i+1 < len(s) && s[i+1] == '(' {
				end := matchingParen(s, i+1)
				if end < 0 {
					return "", fmt.Errorf("unclosed extglob in %q", s)
				}
				if c == '!' {
					return "", fmt.Errorf("negated extglob !(...) is not supported in %q", s)
				}
				inner, err := extglobAlternatives(s[i+2 : end])
				if err != nil {
					return "", err
				}
				b.WriteString("(?:" + inner + ")")
				switch c {
				case '*':
					b.WriteString("*")
				case '?':
					b.WriteString("?")
				case '+':
					b.WriteString("+")
				}
				i = end
				continue
			}
			switch c {
			case '*':
				// collapse runs of '*' (a '**' inside a segment acts as '*')
				for i+1 < len(s) && s[i+1] == '*' {
					i++
				}
				b.WriteString(`[^/]*`)
			case '?':
				b.WriteString(`[^/]`)
			default:
				b.WriteString(regexp.QuoteMeta(string(c)))
			}
		case '[':
			end, cls, ok := parseClass(s, i)
			if !ok {
				b.WriteString(`\[`)
				continue
			}
			b.WriteString(cls)
			i = end
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	return b.String(), nil
}

func extglobAlternatives(inner string) (string, error) {
	parts := splitTopLevel(inner, '|')
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		r, err := segmentRegex(p)
		if err != nil {
			return "", err
		}
		out = append(out, r)
	}
	return strings.Join(out, "|"), nil
}

// matchingParen returns the index of the ')' closing the '(' at open, or -1.
func matchingParen(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

func splitTopLevel(s string, sep byte) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '(', '{', '[':
			depth++
		case ')', '}', ']':
			depth--
		default:
			if s[i] == sep && depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// parseClass parses a bracket expression starting at s[i]=='['. It returns
// the index of the closing ']' and the RE2 class text.
func parseClass(s string, i int) (int, string, bool) {
	j := i + 1
	var b strings.Builder
	b.WriteString("[")
	if j < len(s) && (s[j] == '!' || s[j] == '^') {
		b.WriteString("^/")
		j++
	}
	first := true
	for ; j < len(s); j++ {
		c := s[j]
		switch {
		case c == ']' && !first:
			if b.Len() == 1 {
				return 0, "", false
			}
			b.WriteString("]")
			return j, b.String(), true
		case c == '[' && j+1 < len(s) && s[j+1] == ':':
			end := strings.Index(s[j:], ":]")
			if end < 0 {
				return 0, "", false
			}
			b.WriteString(s[j : j+end+2])
			j += end + 1
		case c == '\\' && j+1 < len(s):
			j++
			b.WriteString(regexp.QuoteMeta(s[j : j+1]))
		case c == '-':
			b.WriteString("-")
		case c == ']' || c == '[' || c == '^':
			b.WriteString(`\` + string(c))
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
		first = false
	}
	return 0, "", false
}

// expandBraces expands {a,b} alternatives and {x..y} ranges, outermost
// first, returning every resulting pattern.
func expandBraces(p string) ([]string, error) {
	open, close := findBrace(p)
	if open < 0 {
		return []string{p}, nil
	}
	inner := p[open+1 : close]
	var alts []string
	if parts := splitTopLevel(inner, ','); len(parts) > 1 {
		alts = parts
	} else if r, ok := expandRange(inner); ok {
		alts = r
	} else {
		// Not a brace expression: keep the braces literally.
		rest, err := expandBraces(p[close+1:])
		if err != nil {
			return nil, err
		}
		out := make([]string, 0, len(rest))
		for _, r := range rest {
			out = append(out, p[:open]+`\{`+escapeBraces(inner)+`\}`+r)
		}
		return out, nil
	}
	var out []string
	for _, a := range alts {
		sub, err := expandBraces(p[:open] + a + p[close+1:])
		if err != nil {
			return nil, err
		}
		out = append(out, sub...)
		if len(out) > maxBraceExpansion {
			return nil, fmt.Errorf("brace expansion produces more than %d patterns", maxBraceExpansion)
		}
	}
	return out, nil
}

func escapeBraces(s string) string {
	return strings.NewReplacer("{", `\{`, "}", `\}`).Replace(s)
}

// findBrace finds the first unescaped '{' and its matching '}'.
func findBrace(p string) (int, int) {
	depth, open := 0, -1
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\':
			i++
		case inClass:
			if c == ']' {
				inClass = false
			}
		case c == '[':
			inClass = true
		case c == '{':
			if depth == 0 {
				open = i
			}
			depth++
		case c == '}' && depth > 0:
			depth--
			if depth == 0 {
				return open, i
			}
		}
	}
	return -1, -1
}

func expandRange(s string) ([]string, bool) {
	a, b, ok := strings.Cut(s, "..")
	if !ok || strings.Contains(b, "..") {
		return nil, false
	}
	if x, err1 := strconv.Atoi(a); err1 == nil {
		y, err2 := strconv.Atoi(b)
		if err2 != nil {
			return nil, false
		}
		step := 1
		if y < x {
			step = -1
		}
		var out []string
		for i := x; ; i += step {
			out = append(out, strconv.Itoa(i))
			if i == y || len(out) > maxBraceExpansion {
				break
			}
		}
		return out, true
	}
	if len(a) == 1 && len(b) == 1 && isLetter(a[0]) && isLetter(b[0]) {
		x, y := a[0], b[0]
		var out []string
		if x <= y {
			for c := x; c <= y; c++ {
				out = append(out, string(c))
			}
		} else {
			for c := x; c >= y; c-- {
				out = append(out, string(c))
			}
		}
		return out, true
	}
	return nil, false
}

func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// IsGlob reports whether s contains glob syntax in the sense of picomatch's
// scanner: any of * ? [ ] { } ( ) or a leading '!'. Strings for which it
// returns false are matched exactly (':', '-', '.' are literal).
func IsGlob(s string) bool {
	return strings.HasPrefix(s, "!") || strings.ContainsAny(s, "*?[]{}()")
}

// LabelGlobRegex converts a glob for a single label (labels contain no '/')
// into an anchored RE2 regex source with picomatch semantics, including the
// rule that a wildcard at the start never matches a leading '.'. The result is
// what `kici compile` stores as a {kind:"regex"} label matcher.
func LabelGlobRegex(glob string) (string, error) {
	if strings.HasPrefix(glob, "!") && !strings.HasPrefix(glob, "!(") {
		return "", fmt.Errorf("label glob %q: negation is not allowed here", glob)
	}
	p := strings.TrimPrefix(glob, "./")
	expanded, err := expandBraces(p)
	if err != nil {
		return "", fmt.Errorf("label glob %q: %w", glob, err)
	}
	alts := make([]string, 0, len(expanded))
	for _, e := range expanded {
		if strings.Contains(e, "/") {
			// keep segment semantics simple: labels never contain '/'
			body, err := segmentRegex(strings.ReplaceAll(e, "/", `\/`))
			if err != nil {
				return "", fmt.Errorf("label glob %q: %w", glob, err)
			}
			alts = append(alts, body)
			continue
		}
		var body string
		if strings.HasPrefix(e, ".") {
			body, err = segmentRegex(e)
		} else {
			var possible bool
			body, possible, err = noLeadingDot(e)
			if err == nil && !possible {
				return "", fmt.Errorf("label glob %q can never match", glob)
			}
		}
		if err != nil {
			return "", fmt.Errorf("label glob %q: %w", glob, err)
		}
		alts = append(alts, body)
	}
	src := "^(?:" + strings.Join(alts, "|") + ")$"
	if _, err := regexp.Compile(src); err != nil {
		return "", fmt.Errorf("label glob %q: %v", glob, err)
	}
	return src, nil
}

// noLeadingDot returns a regex body matching the strings matched by segment
// s that do not start with '.', and whether any such string can exist.
func noLeadingDot(s string) (string, bool, error) {
	if s == "" {
		return "", true, nil
	}
	switch {
	case s[0] == '.':
		return "", false, nil
	case s[0] == '\\' && len(s) > 1 && s[1] == '.':
		return "", false, nil
	case s[0] == '*' && !(len(s) > 1 && s[1] == '('):
		rest := strings.TrimLeft(s, "*")
		restRe, err := segmentRegex(rest)
		if err != nil {
			return "", false, err
		}
		alt := "[^/.][^/]*" + restRe
		if rest == "" {
			return alt, true, nil
		}
		restNoDot, ok, err := noLeadingDot(rest)
		if err != nil {
			return "", false, err
		}
		if !ok {
			return alt, true, nil
		}
		return "(?:" + alt + "|" + restNoDot + ")", true, nil
	case s[0] == '?' && !(len(s) > 1 && s[1] == '('):
		restRe, err := segmentRegex(s[1:])
		if err != nil {
			return "", false, err
		}
		return "[^/.]" + restRe, true, nil
	default:
		// literal, class or extglob first. Classes and extglobs could in
		// theory match '.', which picomatch forbids at the start; labels never
		// start with '.', so the plain translation is kept.
		r, err := segmentRegex(s)
		return r, true, err
	}
}
