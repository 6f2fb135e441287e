package github

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/trigger"
)

// fuzzLock has one workflow per trigger kind, so every normalized event
// also goes through the matcher.
var fuzzLock = func() *lockfile.LockFile {
	lf, err := lockfile.Parse([]byte(`{"schemaVersion":29,"workflows":[{"name":"all","jobs":[],"triggers":[
	{"_type":"push","branches":[{"type":"glob","pattern":"release/**"}],"paths":["src/**","!**/*.md"],"repos":[{"type":"glob","pattern":"myorg/*"}]},
	{"_type":"pr","events":["opened"],"targetBranches":[{"type":"regex","pattern":"^ma","flags":"i"}],"sourceBranches":[{"type":"glob","pattern":"feat/{a,b}*"}]},
	{"_type":"tag","patterns":[{"type":"glob","pattern":"v[0-9]*"}]},
	{"_type":"comment","source":"pr","bodyMatch":{"type":"regex","pattern":"^/deploy\\s+\\w+$"}},
	{"_type":"review","states":["approved"]},{"_type":"review_comment","actions":["created"]},
	{"_type":"release","actions":["published"]},{"_type":"dispatch","types":["deploy"]},
	{"_type":"create","refTypes":["tag"],"patterns":[{"type":"glob","pattern":"v*"}]},{"_type":"delete"},
	{"_type":"status","contexts":["ci/*"],"states":["success"]},
	{"_type":"workflow_run","workflows":["CI"],"conclusions":["success"]},
	{"_type":"fork"},{"_type":"star"},{"_type":"watch"},{"_type":"webhook","events":["deployment"]},
	{"_type":"kici_event","eventName":"e","match":{"$..id":1}},
	{"_type":"generic_webhook","source":"s","match":{"$.sender.login":"/^a/"},"not":{"$.repository[*].private":true}}]}]}`))
	if err != nil {
		panic(err)
	}
	return lf
}()

// FuzzNormalize: whatever the event name and body, Normalize returns an
// event, an unsupported-event result or an invalid-payload error — never a
// panic or another error — and the event goes through the matcher and
// encodes as JSON. Seeds: every real payload in the fixtures.
func FuzzNormalize(f *testing.F) {
	dir := fixturesDir(f)
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(strings.SplitN(filepath.Base(file), ".", 2)[0], b)
	}
	f.Add("push", []byte(`{"ref":"refs/tags/","after":null}`))
	f.Add("pull_request", []byte(`{"pull_request":{"base":{"ref":"main","repo":7},"head":"x"}}`))
	f.Add("status", []byte(`{"branches":[null,1],"sha":5}`))
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		ev, ref, err := Normalize(event, body)
		if err != nil {
			if ev != nil || !(errors.Is(err, provider.ErrUnsupportedEvent) || errors.Is(err, provider.ErrInvalidPayload)) {
				t.Fatalf("untyped error or event with error: %v", err)
			}
			return
		}
		if ev.Type == "" || ref.Ref == "" {
			t.Fatalf("event without type or lock ref: %+v %+v", ev, ref)
		}
		ds := trigger.MatchAll(fuzzLock, ev)
		if _, err := json.Marshal(ds); err != nil {
			t.Fatalf("decisions do not encode: %v", err)
		}
	})
}
