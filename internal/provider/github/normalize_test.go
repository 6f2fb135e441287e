package github

import (
	"bufio"
	"encoding/json"
	"errors"
	"kici.dev/kici/internal/testutil/fixtures"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kici.dev/kici/internal/provider"
)

// fixturesDir holds the real GitHub webhook bodies shipped beside the repo
// (testdata/github-webhooks; override with KICI_GITHUB_FIXTURES).
func fixturesDir(t testing.TB) string {
	if d := os.Getenv("KICI_GITHUB_FIXTURES"); d != "" {
		return d
	}
	d, err := filepath.Abs(fixtures.GitHubWebhooksDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d); err != nil {
		t.Fatalf("GitHub webhook fixtures not found at %s (set KICI_GITHUB_FIXTURES): %v", d, err)
	}
	return d
}

// expectation is one line of testdata/expected.jsonl: the normalized event of
// one fixture, derived independently of this package (with jq) from the
// fixture's fields.
type expectation struct {
	File         string  `json:"file"`
	Event        string  `json:"event"`
	Unsupported  bool    `json:"unsupported"`
	Type         string  `json:"type"`
	Action       *string `json:"action"`
	TargetBranch *string `json:"targetBranch"`
	SourceBranch *string `json:"sourceBranch"`
	BaseBranch   *string `json:"baseBranch"`
	SourceRepo   *string `json:"sourceRepo"`
	Sender       *string `json:"sender"`
	SenderID     int64   `json:"senderId"`
	IsForkPR     bool    `json:"isForkPR"`
	LockRef      string  `json:"lockRef"`
	BaseRef      *string `json:"baseRef"`
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func loadExpectations(t *testing.T) map[string]expectation {
	f, err := os.Open("testdata/expected.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]expectation{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e expectation
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("expected.jsonl: %v", err)
		}
		out[e.File] = e
	}
	return out
}

// TestNormalizeEveryFixture normalizes every real GitHub payload and checks
// each normalized field against the independently derived expectation:
// supported events get the normalized type, branches, repo, sender and lock ref;
// every other event is a typed "unsupported event", never another error.
func TestNormalizeEveryFixture(t *testing.T) {
	dir := fixturesDir(t)
	want := loadExpectations(t)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen, supportedSeen := 0, map[string]bool{}
	for _, de := range entries {
		name := de.Name()
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		seen++
		exp, ok := want[name]
		if !ok {
			t.Errorf("%s: no expectation in testdata/expected.jsonl", name)
			continue
		}
		body, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		event := strings.SplitN(name, ".", 2)[0]
		ev, ref, err := Normalize(event, body)
		if exp.Unsupported {
			if !errors.Is(err, provider.ErrUnsupportedEvent) || ev != nil {
				t.Errorf("%s: want unsupported event, got ev=%v err=%v", name, ev, err)
			}
			var ue *provider.UnsupportedEventError
			if !errors.As(err, &ue) || ue.Event != event || ue.Provider != "github" {
				t.Errorf("%s: want *UnsupportedEventError naming %q, got %#v", name, event, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		supportedSeen[event] = true
		check := func(field, got, want string) {
			if got != want {
				t.Errorf("%s: %s = %q, want %q", name, field, got, want)
			}
		}
		check("type", string(ev.Type), exp.Type)
		check("action", ev.Action, deref(exp.Action))
		check("targetBranch", ev.TargetBranch, deref(exp.TargetBranch))
		check("sourceBranch", ev.SourceBranch, deref(exp.SourceBranch))
		check("baseBranch", ev.BaseBranch, deref(exp.BaseBranch))
		check("sourceRepo", ev.SourceRepo, deref(exp.SourceRepo))
		check("senderUsername", ev.SenderUsername, deref(exp.Sender))
		check("provider", string(ev.Provider), string(provider.GitHub))
		check("lock ref", ref.Ref, exp.LockRef)
		check("lock base ref", ref.BaseRef, deref(exp.BaseRef))
		if ev.SenderUserID != exp.SenderID {
			t.Errorf("%s: senderUserId = %d, want %d", name, ev.SenderUserID, exp.SenderID)
		}
		if ev.IsForkPR != exp.IsForkPR {
			t.Errorf("%s: isForkPR = %v, want %v", name, ev.IsForkPR, exp.IsForkPR)
		}
		if ev.Payload == nil || ev.ChangedFiles != nil {
			t.Errorf("%s: payload %v / changed files %v", name, ev.Payload == nil, ev.ChangedFiles)
		}
	}
	if seen != len(want) || seen < 300 {
		t.Errorf("saw %d fixtures, expected %d", seen, len(want))
	}
	for _, e := range SupportedEvents {
		if !supportedSeen[e] {
			t.Errorf("no fixture exercised supported event %q", e)
		}
	}
}

func fixture(t *testing.T, name string) map[string]any {
	body, err := os.ReadFile(filepath.Join(fixturesDir(t), name))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestForkDetection turns a same-repo PR fixture into a fork PR (another
// head repository, or a deleted fork) and checks IsForkPR and the lock refs.
func TestForkDetection(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(head map[string]any)
		fork   bool
	}{
		{"same repo", func(map[string]any) {}, false},
		{"other repo", func(head map[string]any) {
			repo := head["repo"].(map[string]any)
			repo["id"] = float64(999)
			repo["full_name"] = "attacker/Hello-World"
		}, true},
		{"same name, other id", func(head map[string]any) {
			head["repo"].(map[string]any)["id"] = float64(999)
		}, true},
		{"deleted fork", func(head map[string]any) { head["repo"] = nil }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, file := range []string{"pull_request.opened.1.json", "pull_request_review.submitted.1.json", "pull_request_review_comment.created.1.json"} {
				p := fixture(t, file)
				pr := p["pull_request"].(map[string]any)
				tc.mutate(pr["head"].(map[string]any))
				event := strings.SplitN(file, ".", 2)[0]
				ev, ref, err := Normalize(event, mustJSON(t, p))
				if err != nil {
					t.Fatal(err)
				}
				if ev.IsForkPR != tc.fork {
					t.Errorf("%s: isForkPR = %v, want %v", file, ev.IsForkPR, tc.fork)
				}
				if ref.BaseRef != "master" || ref.Ref != "ec26c3e57ca3a959ca5aad62de7213c562f8c821" {
					t.Errorf("%s: lock ref %+v", file, ref)
				}
			}
		})
	}
}

// TestNormalizeEdgeCases covers bodies a hostile or broken sender could
// send: they are typed results, never panics or untyped errors.
func TestNormalizeEdgeCases(t *testing.T) {
	for _, tc := range []struct {
		event, body string
		wantErr     error
		check       func(t *testing.T, typ, target string)
	}{
		{"push", `not json`, provider.ErrInvalidPayload, nil},
		{"push", `[1,2]`, provider.ErrInvalidPayload, nil},
		{"push", `{}`, provider.ErrUnsupportedEvent, nil},
		{"push", `{"ref":5}`, provider.ErrUnsupportedEvent, nil},
		{"pull_request", `{"action":"opened","pull_request":{"head":{"ref":"x"}}}`, provider.ErrUnsupportedEvent, nil},
		{"unknown_event", `not even json`, provider.ErrUnsupportedEvent, nil},
		{"", `{}`, provider.ErrUnsupportedEvent, nil},
		{"push", `{"ref":"refs/pull/1/merge","after":"abc"}`, nil, func(t *testing.T, typ, target string) {
			if typ != "push" || target != "refs/pull/1/merge" {
				t.Errorf("other ref: %s %s", typ, target)
			}
		}},
		{"issue_comment", `{"action":"created","repository":{"full_name":"o/r"}}`, nil, func(t *testing.T, typ, target string) {
			if typ != "comment" || target != "main" {
				t.Errorf("comment without default branch: %s %s", typ, target)
			}
		}},
	} {
		ev, _, err := Normalize(tc.event, []byte(tc.body))
		if tc.wantErr != nil {
			if !errors.Is(err, tc.wantErr) || ev != nil {
				t.Errorf("%s %q: got %v, want %v", tc.event, tc.body, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %q: %v", tc.event, tc.body, err)
			continue
		}
		tc.check(t, string(ev.Type), ev.TargetBranch)
	}
}
