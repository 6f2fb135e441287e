// Package boundedre matches strings against a regular expression whose
// length bound is checked by counting characters instead of by the
// expression.
//
// Go's regexp compiles a counted repetition such as [a-z]{0,255} into 255
// nested copies of [a-z]: a name rule like that holds 24–110 KB of
// compiled program for as long as the process lives, and compiling it is
// paid at every start of every binary that links its package (a dozen
// such rules were about 1 MB of an idle orchestrator's 3.5 MB live heap,
// and 2.3 MB of the 5 MB its start allocated). A Regexp keeps the
// rule as written, for messages, but matches the expression with each
// bound written open ({m,}) and checks the length of the whole string.
package boundedre

import (
	"fmt"
	"regexp"
	"sync"
)

// Regexp is a compiled rule: a string matches when it is min to max
// characters (runes; an invalid UTF-8 byte counts as one, as regexp
// reads it) long and the open form of the expression matches it.
// Safe for concurrent use.
type Regexp struct {
	written  string
	open     *regexp.Regexp
	min, max int
}

// countedRe finds a counted repetition {m,n} in an expression.
var countedRe = regexp.MustCompile(`\{([0-9]+),([0-9]+)\}`)

var (
	builtMu sync.Mutex
	built   []*Regexp
)

// MustCompile compiles expr, whose counted repetitions {m,n} bound the
// whole string to min..max characters, as that bound plus expr with each
// {m,n} written {m,}. The caller states min and max; the package's tests
// check every Regexp of the packages they import (each package that uses
// this one, a list the tests pin) against expr compiled as written. It
// panics when the open form does not compile, when min < 0 or min > max,
// or when expr has no counted repetition (a plain regexp.MustCompile is
// then as small).
func MustCompile(expr string, min, max int) *Regexp {
	if min < 0 || min > max {
		panic(fmt.Sprintf("boundedre: %q: bounds %d..%d", expr, min, max))
	}
	if !countedRe.MatchString(expr) {
		panic(fmt.Sprintf("boundedre: %q has no counted repetition {m,n}", expr))
	}
	open := countedRe.ReplaceAllString(expr, "{$1,}")
	r := &Regexp{written: expr, open: regexp.MustCompile(open), min: min, max: max}
	builtMu.Lock()
	built = append(built, r)
	builtMu.Unlock()
	return r
}

// MatchString reports whether s is within the length bound and matches
// the expression. Counting stops at max+1 characters, so a string far
// over the bound costs no more than that.
func (r *Regexp) MatchString(s string) bool {
	if len(s) < r.min { // every character is at least a byte
		return false
	}
	n := 0
	for range s {
		if n++; n > r.max {
			return false
		}
	}
	return n >= r.min && r.open.MatchString(s)
}

// String is the expression as written, with its counted repetitions (what
// an error message shows a user).
func (r *Regexp) String() string { return r.written }

// Bounds are the least and the most characters a matching string has.
func (r *Regexp) Bounds() (min, max int) { return r.min, r.max }

// Written is the expression as written, compiled as such: what r must
// agree with on every string. For tests; it compiles anew on each call.
func (r *Regexp) Written() *regexp.Regexp { return regexp.MustCompile(r.written) }

// Built returns every Regexp compiled so far in this process, in the order
// they were compiled: a test that links the product's packages checks each
// against its written form.
func Built() []*Regexp {
	builtMu.Lock()
	defer builtMu.Unlock()
	return append([]*Regexp(nil), built...)
}
