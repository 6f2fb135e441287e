package universal

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/trigger"
)

var fuzzCustom = Config{
	Preset:       PresetCustom,
	PayloadPaths: map[string]string{"ref": "$.ref", "sha": "$..sha", "repo": "$.repo.name", "action": "$.action", "sourceBranch": "$.head[0]"},
	EventMapping: map[string]string{"push": "push", "pr": "pull_request", "note": "comment"},
}

var fuzzWorkflow = &lockfile.Workflow{Name: "w", Triggers: []lockfile.Trigger{
	{Type: "push", Branches: []lockfile.Pattern{{Type: lockfile.PatternGlob, Pattern: "**"}}, Paths: []string{"src/**"}},
	{Type: "pr", Events: []string{"synchronize"}},
	{Type: "comment", CommentOn: "pr", BodyMatch: &lockfile.Pattern{Type: lockfile.PatternGlob, Pattern: "/deploy*"}},
	{Type: "review", States: []string{"approved"}},
	{Type: "release"}, {Type: "create"}, {Type: "tag"}, {Type: "fork"},
}}

// FuzzNormalize runs every preset (selected by the first byte) over
// arbitrary event names and bodies: the result is an event, an
// unsupported-event result or an invalid-payload error, never a panic, and
// events go through the matcher. Seeds: the preset payloads in testdata.
func FuzzNormalize(f *testing.F) {
	events := map[string]string{
		"gitea-push.json": "push", "gitea-tag.json": "push", "gitea-pr.json": "pull_request",
		"gitea-review.json": "pull_request_review_approved", "gitea-issue-comment.json": "issue_comment",
		"gitea-pr-comment.json": "pull_request_comment", "gitea-release.json": "release", "gitea-create.json": "create",
		"gogs-push.json": "push", "gitlab-push.json": "Push Hook", "gitlab-tag.json": "Tag Push Hook",
		"gitlab-mr.json": "Merge Request Hook", "gitlab-note.json": "Note Hook", "gitlab-release.json": "Release Hook",
	}
	files, _ := filepath.Glob("testdata/*.json")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		for i := range Presets() {
			f.Add(uint8(i), events[filepath.Base(file)], b)
		}
	}
	f.Add(uint8(5), "push", []byte(`{"ref":"refs/heads/x","sha":[{"sha":"a"}],"repo":{"name":1}}`))
	f.Fuzz(func(t *testing.T, which uint8, event string, body []byte) {
		presets := Presets()
		cfg := Config{Preset: presets[int(which)%len(presets)]}
		if cfg.Preset == PresetCustom {
			cfg = fuzzCustom
		}
		ev, ref, err := Normalize(cfg, event, body)
		if err != nil {
			if ev != nil || !(errors.Is(err, provider.ErrUnsupportedEvent) || errors.Is(err, provider.ErrInvalidPayload)) {
				t.Fatalf("%s: untyped error or event with error: %v", cfg.Preset, err)
			}
			return
		}
		if ev.Type == "" || ref.Ref == "" {
			t.Fatalf("%s: event without type or lock ref: %+v %+v", cfg.Preset, ev, ref)
		}
		if _, err := json.Marshal(trigger.MatchWorkflow(fuzzWorkflow, ev)); err != nil {
			t.Fatal(err)
		}
	})
}
