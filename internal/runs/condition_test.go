package runs

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"kici.dev/kici/internal/runs/status"

	"github.com/google/uuid"

	"kici.dev/kici/internal/expr"
	"kici.dev/kici/internal/store"
)

// TestJobConditions: A's output drives B's `if`; C's false condition skips
// it with the condition in its reason and cascades to D; E's condition reads
// the run's inputs; F's condition fails at run time and fails the job.
func TestJobConditions(t *testing.T) {
	f := newFixture(t)
	run := &store.Run{ID: uuid.NewString(), WorkflowName: "ci", Provider: "local", RepoIdentifier: "acme/app",
		RepoURL: "file:///tmp/app", Ref: "refs/heads/main", SHA: "0123456789012345678901234567890123456789",
		OrgID: "acme", TriggerType: "manual", CreatedAt: t0}
	ids := map[string]string{}
	mk := func(name, cond string, needs ...store.Need) *store.Job {
		id := uuid.NewString()
		ids[name] = id
		cfg := `{}`
		if cond != "" {
			cfg = `{"if":` + quote(cond) + `}`
		}
		return &store.Job{ID: id, RunID: run.ID, JobName: name, BaseJobName: name, Config: []byte(cfg),
			RunsOnLabels: []string{}, Needs: needs, CreatedAt: t0}
	}
	jobs := []*store.Job{
		mk("a", ""),
		mk("b", `needs.a.outputs.version startsWith "1." && event.branch == "main"`, need("a", status.JobSuccess)),
		mk("c", `needs.a.outputs.version == "2.0"`, need("a", status.JobSuccess)),
		mk("d", "", need("c", status.JobSuccess)),
		mk("e", `inputs.target == "prod"`),
		mk("f", `inputs.count > 2`),
	}
	// The run context is written before the jobs are evaluated, as the
	// pipeline does, so CreateRun's first pass already sees the inputs.
	if err := f.st.CreateRun(f.ctx, run, jobs); err != nil {
		t.Fatal(err)
	}
	if err := f.st.PutRunContext(f.ctx, run.ID, &store.RunContext{Inputs: map[string]any{"target": "staging", "count": "three"}}); err != nil {
		t.Fatal(err)
	}
	if err := f.tr.Reevaluate(f.ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	f.wantStatus(ids, map[string]status.Job{"a": status.JobQueued, "b": status.JobPending, "e": status.JobSkipped, "f": status.JobFailed})
	if msg := f.job(ids["e"]).ErrorMessage; msg != `condition_false: if inputs.target == "prod"` {
		t.Errorf("e errorMessage = %q", msg)
	}
	if msg := f.job(ids["f"]).ErrorMessage; !strings.HasPrefix(msg, ConditionErrorPrefix) {
		t.Errorf("f errorMessage = %q", msg)
	}
	if err := f.st.PutJobOutputs(f.ctx, ids["a"], map[string]string{"version": "1.4.0"}); err != nil {
		t.Fatal(err)
	}
	f.start(ids["a"], t0)
	f.finish(ids["a"], status.JobSuccess, t0)
	f.wantStatus(ids, map[string]status.Job{"b": status.JobQueued, "c": status.JobSkipped, "d": status.JobSkipped})
	if msg := f.job(ids["c"]).ErrorMessage; msg != `condition_false: if needs.a.outputs.version == "2.0"` {
		t.Errorf("c errorMessage = %q", msg)
	}
	if msg := f.job(ids["d"]).ErrorMessage; msg != "upstream_unmet: c (skipped)" {
		t.Errorf("d errorMessage = %q", msg)
	}
}

func quote(s string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `"`, `\"`) + `"`
}

// A step env template reading `steps` or `env` is left for the agent and
// named in the deferred keys; the others are expanded here, and a value
// that expands to text containing "${{" (a branch name) is data, not a
// deferred template.
func TestExpandTemplatesDefersStepScope(t *testing.T) {
	cfg := json.RawMessage(`{"env":{"J":"${{ event.branch }}"},"steps":[` +
		`{"name":"meta","run":"x"},` +
		`{"name":"use","run":"y","env":{"V":"v${{ steps.meta.outputs.version }}","E":"${{ env.DEPLOY }}","B":"${{ event.branch }}"}}]}`)
	out, deferred, err := ExpandTemplates(cfg, expr.Env{Event: expr.Event{Branch: "${{ env.SECRET }}"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int][]string{1: {"E", "V"}}; !reflect.DeepEqual(deferred, want) {
		t.Errorf("deferred = %v, want %v", deferred, want)
	}
	var got struct {
		Env   map[string]string `json:"env"`
		Steps []struct {
			Env map[string]string `json:"env"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	use := got.Steps[1].Env
	if got.Env["J"] != "${{ env.SECRET }}" || use["B"] != "${{ env.SECRET }}" || use["V"] != "v${{ steps.meta.outputs.version }}" || use["E"] != "${{ env.DEPLOY }}" {
		t.Errorf("expanded config %s", out)
	}
}
