package lockfile

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the lock loader: it must return a lock
// or a *ParseError, never panic, and a lock it accepts must re-encode and
// load again. The seed corpus is every lock under testdata plus hand-made
// edge cases; `go test` runs the seeds, `make fuzz` explores.
//
// Run it with a bounded -fuzzminimizetime (make fuzz does): the seeds are
// 5–7 KB locks, an instrumented Parse of one takes about half a millisecond,
// and go test minimizes every input that reaches new coverage for up to
// 60 s by default, one exec per candidate; with that default a 30 s run
// spends nearly all its time minimizing the first new input (about 20
// reported execs), with 500x it makes about 40,000.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.json")
	for _, s := range seeds {
		if b, err := os.ReadFile(s); err == nil {
			f.Add(b)
		}
	}
	lf, err := compileSeed(allTriggersYAML)
	if err == nil {
		if b, err := Encode(lf); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		``, `{}`, `[]`, `null`, `{"schemaVersion":29}`, `{"schemaVersion":29,"workflows":null}`,
		`{"schemaVersion":29,"workflows":[{"name":"w","triggers":[{"_type":"push","repos":[{"type":"regex","pattern":"(?=x)"}]}],"jobs":[]}]}`,
		`{"schemaVersion":29,"workflows":[{"name":"w","triggers":[{"_type":"kici_event","eventName":"e","match":{"$..a[?@.b]":"/x/i"}}],"jobs":[]}]}`,
		`{"schemaVersion":29,"workflows":[{"name":"w","triggers":[null],"jobs":[{"_type":"static","name":"j","runsOn":[{"kind":"regex","source":"(a+)+","flags":""}]}]}]}`,
		`{"schemaVersion":29,"workflows":[{"name":"w","triggers":[],"jobs":[{"_type":"static","name":"j","needs":[{"name":"","runOn":[]}]}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lf, err := Parse(data)
		if err != nil {
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("error is %T, want *ParseError: %v", err, err)
			}
			return
		}
		b, err := Encode(lf)
		if err != nil {
			return // e.g. NaN-free but unencodable raw values cannot occur; tolerate
		}
		if _, err := Parse(b); err != nil {
			t.Fatalf("re-encoded accepted lock is rejected: %v", err)
		}
	})
}

func compileSeed(src string) (*LockFile, error) {
	return Compile([]SourceFile{{Path: ".kici/workflows/ci.yaml", Source: []byte(src)}})
}
