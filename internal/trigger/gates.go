package trigger

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/goccy/go-yaml"

	"kici.dev/kici/internal/lockfile"
)

// FileReader reads a file of the repository at the event's commit, for the
// `requires` gate. ErrFileNotFound (wrapped) means the commit has no such
// regular file. Implementations bound the size they read.
type FileReader interface {
	ReadFile(path string) ([]byte, error)
}

// ErrFileNotFound is what a FileReader returns for a missing file.
var ErrFileNotFound = errors.New("file not found")

// skipCIMarkers are the commit-message markers that skip a push or pull
// request run, as GitHub Actions, GitLab, Woodpecker and Drone honour them.
var skipCIMarkers = []string{"[skip ci]", "[ci skip]"}

// SkipCIMarker returns the `[skip ci]`-style marker msg carries, or "".
// Markers are matched case-insensitively anywhere in the message.
func SkipCIMarker(msg string) string {
	low := strings.ToLower(msg)
	for _, m := range skipCIMarkers {
		if strings.Contains(low, m) {
			return m
		}
	}
	return ""
}

// checkGates evaluates a push/pr trigger's gates after its own checks:
// the `[skip ci]` rule (unless skipCi: false), commitMessage, then requires.
func checkGates(t *lockfile.Trigger, ev *Event, tr *tracer) bool {
	if (t.SkipCI == nil || *t.SkipCI || t.CommitMessage != nil) && ev.CommitMessage == "" && ev.LoadCommitMessage != nil {
		load := ev.LoadCommitMessage
		ev.LoadCommitMessage = nil // once per event, whatever the outcome
		if msg, err := load(); err == nil {
			ev.CommitMessage = msg
		} else {
			tr.add("commit message", "", missing, true, "head commit message unreadable: "+err.Error())
		}
	}
	if t.SkipCI == nil || *t.SkipCI {
		if m := SkipCIMarker(ev.CommitMessage); m != "" {
			return tr.add("skip ci", strings.Join(skipCIMarkers, "|"), firstLine(ev.CommitMessage), false, "commit message carries "+m)
		}
	}
	if c := t.CommitMessage; c != nil && !checkCommitMessage(c, ev, tr) {
		return false
	}
	for i := range t.Requires {
		if !checkRequirement(&t.Requires[i], ev, tr) {
			return false
		}
	}
	return true
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

func checkCommitMessage(c *lockfile.CommitMessageFilter, ev *Event, tr *tracer) bool {
	msg := ev.CommitMessage
	val := firstLine(msg)
	if msg == "" {
		val = missing
	}
	for _, s := range c.Contains {
		if !tr.add("commit message contains", s, val, strings.Contains(msg, s), "message does not contain it") {
			return false
		}
	}
	for _, s := range c.NotContains {
		if !tr.add("commit message notContains", s, val, !strings.Contains(msg, s), "message contains it") {
			return false
		}
	}
	for _, p := range c.Matches {
		ok, err := matchPattern(p, msg)
		if err != nil {
			return tr.add("commit message matches", "/"+p.Pattern+"/", val, false, err.Error())
		}
		if !tr.add("commit message matches", "/"+p.Pattern+"/", val, ok, "message does not match") {
			return false
		}
	}
	for _, p := range c.NotMatches {
		ok, err := matchPattern(p, msg)
		if err != nil {
			return tr.add("commit message notMatches", "/"+p.Pattern+"/", val, false, err.Error())
		}
		if !tr.add("commit message notMatches", "/"+p.Pattern+"/", val, !ok, "message matches") {
			return false
		}
	}
	return true
}

// checkRequirement reads r.File through ev.Files and tests its content. No
// reader, a missing file or an unparsable document fail the check (KiCI:
// an indeterminate content filter drops the trigger).
func checkRequirement(r *lockfile.Requirement, ev *Event, tr *tracer) bool {
	what := "requires " + r.File
	if ev.Files == nil {
		return tr.add(what, string(r.Format), missing, false, "file contents are not available for this event")
	}
	data, err := ev.Files.ReadFile(r.File)
	if err != nil {
		reason := err.Error()
		if errors.Is(err, ErrFileNotFound) {
			reason = "no such file at the event's commit"
		}
		return tr.add(what, string(r.Format), missing, false, reason)
	}
	switch r.Format {
	case lockfile.RequireText:
		text := string(data)
		if r.Contains != "" && !tr.add(what, "contains "+r.Contains, firstLine(text), strings.Contains(text, r.Contains), "file does not contain it") {
			return false
		}
		if r.Matches != nil {
			ok, err := matchPattern(*r.Matches, text)
			reason := "file does not match"
			if err != nil {
				reason = err.Error()
			}
			return tr.add(what, "matches /"+r.Matches.Pattern+"/", firstLine(text), ok && err == nil, reason)
		}
		return tr.add(what, "exists", fmt.Sprintf("%d bytes", len(data)), true, "")
	default:
		doc, err := decodeDocument(r.Format, data)
		if err != nil {
			return tr.add(what, string(r.Format), "(unparsable)", false, err.Error())
		}
		if len(r.Match) == 0 {
			return tr.add(what, "exists", fmt.Sprintf("%d bytes", len(data)), true, "")
		}
		f, err := CompileJSONPathFilter(r.Match)
		if err != nil {
			return tr.add(what, compactJSON(r.Match), missing, false, err.Error())
		}
		return f.eval(doc, false, tr)
	}
}

// decodeDocument decodes a JSON or YAML file into encoding/json's value
// shapes (map[string]any, []any, float64, string, bool, nil), so the
// JSONPath comparison rules are the same for both.
func decodeDocument(format lockfile.RequireFormat, data []byte) (any, error) {
	var v any
	if format == lockfile.RequireYAML {
		var y any
		if err := yaml.Unmarshal(data, &y); err != nil {
			return nil, fmt.Errorf("not valid YAML: %v", err)
		}
		b, err := json.Marshal(y)
		if err != nil {
			return nil, fmt.Errorf("YAML document has no JSON form: %v", err)
		}
		data = b
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	return v, nil
}
