package contexts

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"kici.dev/kici/internal/trigger/pattern"
)

// cacheMax bounds each compiled-pattern cache; when full it starts over.
// Context patterns are operator-written and few, so the bound only guards
// against unbounded growth from many distinct scope templates.
const cacheMax = 4096

// compiledCache keeps compiled patterns by their text: every dispatch
// matches the same context names, branch restrictions and binding
// patterns, and compiling a pattern (to a regular expression) costs far
// more than matching it. Invalid patterns are not cached.
type compiledCache[T any] struct {
	mu sync.Mutex
	m  map[string]T
}

func (c *compiledCache[T]) get(p string, compile func(string) (T, error)) (T, error) {
	c.mu.Lock()
	v, ok := c.m[p]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := compile(p)
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= cacheMax {
		c.m = make(map[string]T)
	}
	c.m[p] = v
	c.mu.Unlock()
	return v, nil
}

var (
	globCache  compiledCache[*pattern.Glob]
	regexCache compiledCache[*regexp.Regexp]
)

// compileGlob returns the compiled glob for p, from the cache when it is
// there.
func compileGlob(p string) (*pattern.Glob, error) { return globCache.get(p, pattern.CompileGlob) }

// matchGlob reports whether value matches glob p; an invalid pattern never
// matches.
func matchGlob(p, value string) bool {
	g, err := compileGlob(p)
	return err == nil && g.Match(value)
}

// HostRegex parses a binding host pattern written /source/ or /source/i
// and compiles it (cached). isRegex is false when p is not in that form
// (it is then "**", an exact name or a glob). err explains an invalid
// one: a flag other than i, an empty source, or a source Go's regexp
// refuses; HostMatches treats such a pattern as matching nothing.
func HostRegex(p string) (re *regexp.Regexp, isRegex bool, err error) {
	end := strings.LastIndex(p, "/")
	if !strings.HasPrefix(p, "/") || end <= 0 {
		return nil, false, nil
	}
	src, flags := p[1:end], p[end+1:]
	prefix := ""
	switch flags {
	case "":
	case "i":
		prefix = "(?i)"
	default:
		return nil, true, fmt.Errorf("%q: the only regular-expression flag is i", p)
	}
	if src == "" {
		return nil, true, fmt.Errorf("%q: empty regular expression (use ** for any agent)", p)
	}
	re, err = regexCache.get(prefix+src, regexp.Compile)
	if err != nil {
		return nil, true, fmt.Errorf("%q is not a valid regular expression: %v", p, err)
	}
	return re, true, nil
}
