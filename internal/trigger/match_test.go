package trigger

import (
	"encoding/json"
	"strings"
	"testing"

	"kici.dev/kici/internal/lockfile"
)

func glob(ps ...string) []lockfile.Pattern {
	out := make([]lockfile.Pattern, len(ps))
	for i, p := range ps {
		out[i] = lockfile.Pattern{Type: lockfile.PatternGlob, Pattern: p}
	}
	return out
}

func re(p, flags string) lockfile.Pattern {
	return lockfile.Pattern{Type: lockfile.PatternRegex, Pattern: p, Flags: flags}
}

func wf(ts ...lockfile.Trigger) *lockfile.Workflow {
	return &lockfile.Workflow{Name: "w", Triggers: ts}
}

type matchCase struct {
	name string
	t    lockfile.Trigger
	ev   Event
	want bool
}

func runCases(t *testing.T, cases []matchCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := c.ev
			d := MatchWorkflow(wf(c.t), &ev)
			if d.Matched != c.want {
				b, _ := json.MarshalIndent(d, "", "  ")
				t.Fatalf("matched = %v, want %v\n%s", d.Matched, c.want, b)
			}
		})
	}
}

func push(branch string, files ...string) Event {
	return Event{Type: "push", TargetBranch: branch, ChangedFiles: files}
}

func TestPushBranches(t *testing.T) {
	runCases(t, []matchCase{
		{"glob main", lockfile.Trigger{Type: "push", Branches: glob("main")}, push("main"), true},
		{"glob main vs develop", lockfile.Trigger{Type: "push", Branches: glob("main")}, push("develop"), false},
		{"feature/* login", lockfile.Trigger{Type: "push", Branches: glob("feature/*")}, push("feature/login"), true},
		{"feature/* bugfix", lockfile.Trigger{Type: "push", Branches: glob("feature/*")}, push("bugfix/login"), false},
		{"feature/* nested", lockfile.Trigger{Type: "push", Branches: glob("feature/*")}, push("feature/a/b"), false},
		{"release/** v1.0", lockfile.Trigger{Type: "push", Branches: glob("release/**")}, push("release/v1.0"), true},
		{"release/** hotfix", lockfile.Trigger{Type: "push", Branches: glob("release/**")}, push("release/v1.0/hotfix"), true},
		{"release/** main", lockfile.Trigger{Type: "push", Branches: glob("release/**")}, push("main"), false},
		{"regex release", lockfile.Trigger{Type: "push", Branches: []lockfile.Pattern{re(`^release-\d+\.\d+$`, "")}}, push("release-1.0"), true},
		{"regex release-abc", lockfile.Trigger{Type: "push", Branches: []lockfile.Pattern{re(`^release-\d+\.\d+$`, "")}}, push("release-abc"), false},
		{"regex i flag", lockfile.Trigger{Type: "push", Branches: []lockfile.Pattern{re(`^FEATURE`, "i")}}, push("feature-123"), true},
		{"empty branches and paths", lockfile.Trigger{Type: "push"}, push("anything", "x/y.go"), true},
		{"empty branches no files", lockfile.Trigger{Type: "push"}, push("anything"), true},
		{"main|release-* release", lockfile.Trigger{Type: "push", Branches: glob("main", "release-*")}, push("release-1.0"), true},
		{"main|release-* feature", lockfile.Trigger{Type: "push", Branches: glob("main", "release-*")}, push("feature/test"), false},
		{"negation is ORed", lockfile.Trigger{Type: "push", Branches: glob("main", "!release")}, push("develop"), true},
		{"negation excludes", lockfile.Trigger{Type: "push", Branches: glob("main", "!release")}, push("release"), false},
		{"pr event vs push trigger", lockfile.Trigger{Type: "push"}, Event{Type: "pull_request", Action: "opened"}, false},
		{"invalid regex fails, no panic", lockfile.Trigger{Type: "push", Branches: []lockfile.Pattern{re(`(?=x)`, "")}}, push("x"), false},
	})
}

func TestPaths(t *testing.T) {
	pt := func(paths ...string) lockfile.Trigger { return lockfile.Trigger{Type: "push", Paths: paths} }
	runCases(t, []matchCase{
		{"empty paths any files", pt(), push("main", "a"), true},
		{"empty paths no files", pt(), push("main"), true},
		{"src/**/*.ts app", pt("src/**/*.ts"), push("main", "src/app.ts"), true},
		{"src/**/*.ts tests", pt("src/**/*.ts"), push("main", "tests/app.test.ts"), false},
		{"src/** no files", pt("src/**"), push("main"), false},
		{"!**/*.md readme", pt("!**/*.md"), push("main", "README.md"), false},
		{"!**/*.md app", pt("!**/*.md"), push("main", "src/app.ts"), true},
		{"src/**,!test app", pt("src/**", "!**/*.test.ts"), push("main", "src/app.ts"), true},
		{"src/**,!test test", pt("src/**", "!**/*.test.ts"), push("main", "src/app.test.ts"), false},
		{"src/**,!test docs", pt("src/**", "!**/*.test.ts"), push("main", "docs/README.md"), false},
		{"src/**,!src/temp", pt("src/**", "!src/temp/**"), push("main", "src/temp/cache.ts"), false},
		{"exclusion filters, not veto", pt("src/**", "!**/*.md"), push("main", "src/app.ts", "README.md"), true},
		{"only excluded md", pt("src/**", "!**/*.md"), push("main", "src/app.md"), false},
		{"three patterns", pt("src/**", "!**/*.test.ts", "!**/*.md"), push("main", "src/utils.ts", "tests/foo.test.ts", "docs/README.md"), true},
		{"exclusion only, mixed", pt("!src/generated/**"), push("main", "src/generated/foo.ts", "src/main.ts"), true},
		{"exclusion only, all generated", pt("!src/generated/**"), push("main", "src/generated/foo.ts"), false},
		{"dotfile not matched by **", pt("src/**"), push("main", "src/.env"), false},
	})
}

func pr(action, target, source string, files ...string) Event {
	return Event{Type: "pull_request", Action: action, TargetBranch: target, SourceBranch: source, ChangedFiles: files}
}

func TestPR(t *testing.T) {
	runCases(t, []matchCase{
		{"events opened", lockfile.Trigger{Type: "pr", Events: []string{"opened", "synchronize"}}, pr("opened", "main", "f"), true},
		{"events closed", lockfile.Trigger{Type: "pr", Events: []string{"opened", "synchronize"}}, pr("closed", "main", "f"), false},
		{"events no action", lockfile.Trigger{Type: "pr", Events: []string{"opened", "synchronize"}}, pr("", "main", "f"), false},
		{"push event vs pr", lockfile.Trigger{Type: "pr"}, push("main"), false},
		{"target develop", lockfile.Trigger{Type: "pr", TargetBranches: glob("main")}, pr("opened", "develop", "f"), false},
		{"source feature", lockfile.Trigger{Type: "pr", SourceBranches: glob("feature/*")}, pr("opened", "main", "feature/login"), true},
		{"source bugfix", lockfile.Trigger{Type: "pr", SourceBranches: glob("feature/*")}, pr("opened", "main", "bugfix/crash"), false},
		{"source missing", lockfile.Trigger{Type: "pr", SourceBranches: glob("feature/*")}, pr("opened", "main", ""), false},
		{"paths src", lockfile.Trigger{Type: "pr", Paths: []string{"src/**", "!**/*.md"}}, pr("opened", "main", "f", "src/app.ts"), true},
		{"paths docs only", lockfile.Trigger{Type: "pr", Paths: []string{"src/**", "!**/*.md"}}, pr("opened", "main", "f", "README.md", "docs/guide.md"), false},
		{"paths src readme", lockfile.Trigger{Type: "pr", Paths: []string{"src/**", "!**/*.md"}}, pr("opened", "main", "f", "src/README.md"), false},
	})
}

func TestTag(t *testing.T) {
	tagEv := func(name string) Event { return Event{Type: "tag", TargetBranch: name} }
	runCases(t, []matchCase{
		{"v* v1.0.0", lockfile.Trigger{Type: "tag", Patterns: glob("v*")}, tagEv("v1.0.0"), true},
		{"v* release", lockfile.Trigger{Type: "tag", Patterns: glob("v*")}, tagEv("release-1.0"), false},
		{"empty patterns", lockfile.Trigger{Type: "tag"}, tagEv("anything"), true},
		{"push vs tag trigger", lockfile.Trigger{Type: "tag"}, push("v1"), false},
		{"regex semver", lockfile.Trigger{Type: "tag", Patterns: []lockfile.Pattern{re(`^v\d+\.\d+\.\d+$`, "")}}, tagEv("v1.2.3"), true},
	})
}

func TestRepos(t *testing.T) {
	rp := func(pats ...lockfile.Pattern) lockfile.Trigger {
		return lockfile.Trigger{Type: "push", Repos: pats}
	}
	ev := func(repo string) Event { e := push("main"); e.SourceRepo = repo; return e }
	runCases(t, []matchCase{
		{"no repos any", rp(), ev("x/y"), true},
		{"myorg/* api", rp(glob("myorg/*")...), ev("myorg/api"), true},
		{"myorg/* other", rp(glob("myorg/*")...), ev("other/repo"), false},
		{"myorg/* dotfile", rp(glob("myorg/*")...), ev("myorg/.github"), false},
		{"exclusion only", rp(glob("!myorg/internal-*")...), ev("myorg/internal-tools"), false},
		{"exclusion only other", rp(glob("!myorg/internal-*")...), ev("myorg/api"), true},
		{"include+exclude secret", rp(glob("myorg/*", "!myorg/secret-*")...), ev("myorg/secret-repo"), false},
		{"include+exclude api", rp(glob("myorg/*", "!myorg/secret-*")...), ev("myorg/api"), true},
		{"regex", rp(re(`^myorg/api-v\d+$`, "")), ev("myorg/api-v2"), true},
		{"regex exclusion", rp(re(`!^myorg/api`, "")), ev("myorg/api-v2"), false},
		{"branch + repo match", lockfile.Trigger{Type: "push", Branches: glob("main"), Repos: glob("myorg/*")}, ev("myorg/api"), true},
		{"branch + repo other", lockfile.Trigger{Type: "push", Branches: glob("main"), Repos: glob("myorg/*")}, ev("other/repo"), false},
		{"repo missing", lockfile.Trigger{Type: "push", Branches: glob("main"), Repos: glob("myorg/*")}, push("main"), false},
	})
	d := MatchWorkflow(wf(lockfile.Trigger{Type: "push", Repos: glob("myorg/*")}), &Event{Type: "push", TargetBranch: "main"})
	last := d.Checks[len(d.Checks)-1]
	if last.Check != "repo" || last.Value != "(missing)" || last.Passed {
		t.Fatalf("missing repo check = %+v", last)
	}
}

func TestOtherKinds(t *testing.T) {
	pl := func(typ, action string, payload string) Event {
		var p map[string]any
		if payload != "" {
			if err := json.Unmarshal([]byte(payload), &p); err != nil {
				panic(err)
			}
		}
		return Event{Type: Kind(typ), Action: action, Payload: p}
	}
	runCases(t, []matchCase{
		{"comment deleted", lockfile.Trigger{Type: "comment", Actions: []string{"created"}}, pl("comment", "deleted", ""), false},
		{"comment no action", lockfile.Trigger{Type: "comment", Actions: []string{"created"}}, pl("comment", "", ""), false},
		{"comment issue on issue", lockfile.Trigger{Type: "comment", CommentOn: "issue"}, pl("comment", "created", `{"issue":{}}`), true},
		{"comment issue on pr", lockfile.Trigger{Type: "comment", CommentOn: "issue"}, pl("comment", "created", `{"issue":{"pull_request":{}}}`), false},
		{"comment pr on pr", lockfile.Trigger{Type: "comment", CommentOn: "pr"}, pl("comment", "created", `{"issue":{"pull_request":{}}}`), true},
		{"comment pr on issue", lockfile.Trigger{Type: "comment", CommentOn: "pr"}, pl("comment", "created", `{"issue":{}}`), false},
		{"body glob", lockfile.Trigger{Type: "comment", BodyMatch: &lockfile.Pattern{Type: lockfile.PatternGlob, Pattern: "/deploy*"}}, pl("comment", "created", `{"comment":{"body":"/deploy production"}}`), true},
		{"body glob other", lockfile.Trigger{Type: "comment", BodyMatch: &lockfile.Pattern{Type: lockfile.PatternGlob, Pattern: "/deploy*"}}, pl("comment", "created", `{"comment":{"body":"just a comment"}}`), false},
		{"body glob slash", lockfile.Trigger{Type: "comment", BodyMatch: &lockfile.Pattern{Type: lockfile.PatternGlob, Pattern: "/deploy*"}}, pl("comment", "created", `{"comment":{"body":"/deploy prod/eu"}}`), false},
		{"body regex", lockfile.Trigger{Type: "comment", BodyMatch: &lockfile.Pattern{Type: lockfile.PatternRegex, Pattern: `^/deploy\s+\w+$`}}, pl("comment", "created", `{"comment":{"body":"/deploy staging"}}`), true},
		{"review state", lockfile.Trigger{Type: "review", States: []string{"approved"}}, pl("review", "submitted", `{"review":{"state":"changes_requested"}}`), false},
		{"review action", lockfile.Trigger{Type: "review", Actions: []string{"submitted"}}, pl("review", "dismissed", `{"review":{"state":"approved"}}`), false},
		{"review empty lists", lockfile.Trigger{Type: "review"}, pl("review", "submitted", `{"review":{"state":"approved"}}`), true},
		{"release unpublished", lockfile.Trigger{Type: "release", Actions: []string{"published"}}, pl("release", "unpublished", ""), false},
		{"release missing action", lockfile.Trigger{Type: "release", Actions: []string{"published"}}, pl("release", "", ""), false},
		{"release empty actions", lockfile.Trigger{Type: "release"}, pl("release", "", ""), true},
		{"dispatch deploy", lockfile.Trigger{Type: "dispatch", Types: []string{"deploy", "rollback"}}, pl("dispatch", "deploy", ""), true},
		{"dispatch test", lockfile.Trigger{Type: "dispatch", Types: []string{"deploy", "rollback"}}, pl("dispatch", "test", ""), false},
		{"dispatch missing", lockfile.Trigger{Type: "dispatch", Types: []string{"deploy", "rollback"}}, pl("dispatch", "", ""), false},
		{"dispatch any", lockfile.Trigger{Type: "dispatch"}, pl("dispatch", "x", ""), true},
		{"create ref type", lockfile.Trigger{Type: "create", RefTypes: []string{"tag"}}, pl("create", "", `{"ref_type":"branch","ref":"x"}`), false},
		{"create pattern", lockfile.Trigger{Type: "create", Patterns: glob("feature/*")}, pl("create", "", `{"ref_type":"branch","ref":"feature/x"}`), true},
		{"delete pattern", lockfile.Trigger{Type: "delete", Patterns: glob("release-*")}, pl("delete", "", `{"ref_type":"branch","ref":"main"}`), false},
		{"status match", lockfile.Trigger{Type: "status", Contexts: []string{"ci/*"}, States: []string{"success"}}, pl("status", "", `{"context":"ci/test","state":"success"}`), true},
		{"status failure", lockfile.Trigger{Type: "status", Contexts: []string{"ci/*"}, States: []string{"success"}}, pl("status", "", `{"context":"ci/test","state":"failure"}`), false},
		{"status context", lockfile.Trigger{Type: "status", Contexts: []string{"ci/*"}, States: []string{"success"}}, pl("status", "", `{"context":"deploy/staging","state":"success"}`), false},
		{"workflow_run action", lockfile.Trigger{Type: "workflow_run", Actions: []string{"completed"}}, pl("workflow_run", "requested", ""), false},
		{"workflow_run name", lockfile.Trigger{Type: "workflow_run", Workflows: []string{"CI", "Build"}}, pl("workflow_run", "completed", `{"workflow_run":{"name":"Deploy"}}`), false},
		{"workflow_run conclusion", lockfile.Trigger{Type: "workflow_run", Conclusions: []string{"success"}}, pl("workflow_run", "completed", `{"workflow_run":{"name":"CI","conclusion":"failure"}}`), false},
		{"fork", lockfile.Trigger{Type: "fork"}, pl("fork", "", ""), true},
		{"star action", lockfile.Trigger{Type: "star", Actions: []string{"created"}}, pl("star", "deleted", ""), false},
		{"webhook deployment", lockfile.Trigger{Type: "webhook", Events: []string{"deployment", "deployment_status"}}, pl("deployment", "", ""), true},
		{"webhook deployment_status", lockfile.Trigger{Type: "webhook", Events: []string{"deployment", "deployment_status"}}, pl("deployment_status", "", ""), true},
		{"webhook push", lockfile.Trigger{Type: "webhook", Events: []string{"deployment", "deployment_status"}}, pl("push", "", ""), false},
		{"webhook action missing", lockfile.Trigger{Type: "webhook", Events: []string{"deployment"}, Actions: []string{"created"}}, pl("deployment", "", ""), false},
		{"schedule exact", lockfile.Trigger{Type: "schedule", CronExpression: "0 * * * *"}, pl("schedule", "", `{"cronExpression":"0 0 * * *"}`), false},
		{"workflow_complete status", lockfile.Trigger{Type: "workflow_complete", Name: "CI", Status: []string{"success", "failed"}}, pl("workflow_complete", "", `{"workflowName":"CI","status":"cancelled"}`), false},
		{"workflow_complete name", lockfile.Trigger{Type: "workflow_complete", Name: "CI", Status: []string{"success", "failed"}}, pl("workflow_complete", "", `{"workflowName":"Deploy","status":"success"}`), false},
		{"job_complete skipped", lockfile.Trigger{Type: "job_complete", Status: []string{"success", "failed"}}, pl("job_complete", "", `{"status":"skipped"}`), false},
		{"job_complete job", lockfile.Trigger{Type: "job_complete", Workflow: "CI", Job: "test", Status: []string{"success"}}, pl("job_complete", "", `{"workflowName":"CI","jobName":"lint","status":"success"}`), false},
		{"lifecycle", lockfile.Trigger{Type: "lifecycle", Events: []string{"workflow_complete", "job_failed"}}, pl("lifecycle", "", `{"lifecycleEvent":"job_failed"}`), true},
		{"lifecycle sources", lockfile.Trigger{Type: "lifecycle", Events: []string{"job_failed"}, Sources: []string{"org/deploy-repo"}}, pl("lifecycle", "", `{"lifecycleEvent":"job_failed","sourceRepo":"org/other-repo"}`), false},
		{"kici_event name", lockfile.Trigger{Type: "kici_event", EventName: "x"}, pl("kici_event", "", `{"eventName":"x"}`), true},
	})
}

func TestDecisionShape(t *testing.T) {
	w := wf(lockfile.Trigger{Type: "pr", Events: []string{"opened"}}, lockfile.Trigger{Type: "push"})
	d := MatchWorkflow(w, &Event{Type: "pull_request", Action: "opened"})
	if !d.Matched || *d.MatchedTrigger != 0 || d.Summary != "Matched trigger 1 (pr)" {
		t.Fatalf("pr decision = %+v", d)
	}
	d = MatchWorkflow(w, &Event{Type: "push", TargetBranch: "main"})
	if !d.Matched || *d.MatchedTrigger != 1 || d.Summary != "Matched trigger 2 (push)" {
		t.Fatalf("push decision = %+v", d)
	}
	d = MatchWorkflow(wf(lockfile.Trigger{Type: "pr", TargetBranches: glob("develop")}), &Event{Type: "pull_request", TargetBranch: "main"})
	if d.Matched || d.MatchedTrigger != nil || d.Summary != "No triggers matched" {
		t.Fatalf("unmatched decision = %+v", d)
	}
	d = MatchWorkflow(wf(), &Event{Type: "push"})
	if d.Matched || d.Summary != "No triggers defined" {
		t.Fatalf("no triggers = %+v", d)
	}
	// failed branch check carries the value; JSON is camelCase.
	d = MatchWorkflow(wf(lockfile.Trigger{Type: "push", Branches: glob("main")}), &Event{Type: "push", TargetBranch: "develop"})
	last := d.Checks[len(d.Checks)-1]
	if last.Check != "branch" || last.Value != "develop" || last.Passed || last.Pattern != "main" {
		t.Fatalf("branch check = %+v", last)
	}
	b, _ := json.Marshal(d)
	for _, k := range []string{`"name":"w"`, `"matched":false`, `"checks":[`, `"summary":"No triggers matched"`, `"check":"branch"`, `"passed":false`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("decision JSON %s lacks %s", b, k)
		}
	}
	if !strings.Contains(string(b), `"matchedTrigger":null`) {
		t.Errorf("unmatched decision JSON lacks matchedTrigger null: %s", b)
	}
	// failing pr event type is traced
	d = MatchWorkflow(wf(lockfile.Trigger{Type: "pr"}), &Event{Type: "push"})
	if d.Checks[0].Check != "event type" || d.Checks[0].Passed {
		t.Fatalf("event type check = %+v", d.Checks)
	}
	// paths trace format
	d = MatchWorkflow(wf(lockfile.Trigger{Type: "push", Paths: []string{"src/**", "!**/*.md"}}), &Event{Type: "push", ChangedFiles: []string{"a.md"}})
	if p := d.Checks[len(d.Checks)-1]; p.Pattern != "include: [src/**] exclude: [**/*.md]" || p.Passed {
		t.Fatalf("paths check = %+v", p)
	}
}

func TestMatchAllAndNeedsChangedFiles(t *testing.T) {
	lf := &lockfile.LockFile{Workflows: []lockfile.Workflow{
		{Name: "a", Triggers: []lockfile.Trigger{{Type: "push"}}},
		{Name: "b", Triggers: []lockfile.Trigger{{Type: "tag"}}},
	}}
	ds := MatchAll(lf, &Event{Type: "push", TargetBranch: "main"})
	if len(ds) != 2 || !ds[0].Matched || ds[1].Matched || ds[1].Name != "b" {
		t.Fatalf("decisions = %+v", ds)
	}
	if NeedsChangedFiles(lf) {
		t.Fatal("no paths, yet NeedsChangedFiles")
	}
	lf.Workflows[1].Triggers = append(lf.Workflows[1].Triggers, lockfile.Trigger{Type: "pr", Paths: []string{"src/**"}})
	if !NeedsChangedFiles(lf) {
		t.Fatal("paths present, NeedsChangedFiles false")
	}
}
