package ctxgate

import (
	"sync"

	"kici.dev/kici/internal/trigger/pattern"
)

// globCacheMax bounds the compiled-glob cache; when full it starts over.
// Context patterns are operator-written and few, so the bound only guards
// against unbounded growth from many distinct scope templates.
const globCacheMax = 4096

// globCache keeps compiled globs: every dispatch matches the same context
// names, branch restrictions and binding patterns, and compiling a glob
// (to a regular expression) costs far more than matching it.
var globCache struct {
	sync.Mutex
	m map[string]*pattern.Glob
}

// compileGlob returns the compiled glob for p, from the cache when it is
// there. Invalid patterns are not cached (the error is returned each time).
func compileGlob(p string) (*pattern.Glob, error) {
	globCache.Lock()
	g, ok := globCache.m[p]
	globCache.Unlock()
	if ok {
		return g, nil
	}
	g, err := pattern.CompileGlob(p)
	if err != nil {
		return nil, err
	}
	globCache.Lock()
	if globCache.m == nil || len(globCache.m) >= globCacheMax {
		globCache.m = make(map[string]*pattern.Glob)
	}
	globCache.m[p] = g
	globCache.Unlock()
	return g, nil
}

// matchGlob reports whether value matches glob p; an invalid pattern never
// matches.
func matchGlob(p, value string) bool {
	g, err := compileGlob(p)
	return err == nil && g.Match(value)
}
