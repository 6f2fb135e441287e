package runner

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/protocol"
)

func TestParseOutputs(t *testing.T) {
	got, err := ParseOutputs([]byte("a=1\n\nnotes<<EOF\nline 1\nline=2\nEOF\na=2\nempty=\nx-y_z=k=v\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "2", "notes": "line 1\nline=2", "empty": "", "x-y_z": "k=v"}
	if len(got) != len(want) {
		t.Fatalf("got %q", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for _, bad := range []string{"novalue\n", "1x=2\n", "k<<EOF\nunterminated\n", "k<<\nx\n"} {
		if _, err := ParseOutputs([]byte(bad)); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
}

func runJob(t *testing.T, job lockfile.Job, d *protocol.JobDispatch) (*Result, *recorder) {
	t.Helper()
	no := false
	job.Type, job.Name, job.Checkout = lockfile.JobStatic, "build", &no
	cfg, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	if d == nil {
		d = &protocol.JobDispatch{}
	}
	d.RunID, d.JobID, d.JobName, d.JobConfig = "r1", "j1", "build", cfg
	rec := &recorder{}
	r := New(Options{WorkRoot: t.TempDir(), HostEnv: os.Environ()}, rec)
	return r.Run(context.Background(), d), rec
}

// TestJobOutputs: a step's key=value and heredoc outputs become the job's
// declared outputs, masked when they hold a secret; undeclared keys stay
// on the agent; a later step's condition reads an earlier step's output.
func TestJobOutputs(t *testing.T) {
	job := lockfile.Job{
		Outputs: map[string]string{"version": "meta.version", "notes": "meta.notes", "token": "meta.token"},
		Steps: []lockfile.Step{
			{Name: "meta", Run: `echo "version=1.2.3" >> "$KICI_OUTPUT"
printf 'notes<<END\nfirst\nsecond\nEND\n' >> "$KICI_OUTPUT"
echo "token=Bearer $TOK" >> "$KICI_OUTPUT"
echo "internal=x" >> "$KICI_OUTPUT"`, Secrets: map[string]string{"TOK": "s:tok"}},
			{Name: "when-1", If: `steps.meta.outputs.version startsWith "1."`, Run: "true"},
			{Name: "when-2", If: `steps.meta.outputs.version == "2" || needs.up.result != "success"`, Run: "false"},
		},
	}
	res, rec := runJob(t, job, &protocol.JobDispatch{Secrets: map[string]string{"s:tok": "hunter2"},
		UpstreamJobStatuses: map[string]status.Job{"up": status.JobSuccess}})
	if res.State != status.JobSuccess {
		t.Fatalf("state = %s (%s)", res.State, res.Error)
	}
	want := map[string]string{"version": "1.2.3", "notes": "first\nsecond", "token": "Bearer ***"}
	if len(res.Outputs) != 3 || res.Outputs["version"] != want["version"] || res.Outputs["notes"] != want["notes"] || res.Outputs["token"] != want["token"] {
		t.Fatalf("outputs = %q, want %q", res.Outputs, want)
	}
	if res.Steps[1].Status != status.StepSuccess || res.Steps[2].Status != status.StepSkipped || !strings.HasPrefix(res.Steps[2].Error, "condition_false: if ") {
		t.Fatalf("steps = %+v", res.Steps)
	}
	var final *protocol.JobStatus
	for _, m := range rec.msgs {
		if js, ok := m.(*protocol.JobStatus); ok && js.State != status.JobRunning {
			final = js
		}
	}
	if final == nil || final.Data == nil || final.Data.Outputs["version"] != "1.2.3" {
		t.Fatalf("terminal job.status = %+v", final)
	}
}

// TestJobOutputsCap: going over the per-job output budget fails the step
// that did it, by name.
func TestJobOutputsCap(t *testing.T) {
	job := lockfile.Job{Outputs: map[string]string{"a": "one.a"}, Steps: []lockfile.Step{
		{Name: "one", Run: `echo "a=small" >> "$KICI_OUTPUT"`},
		{Name: "flood", Run: `head -c 1100000 /dev/zero | tr '\0' x | sed 's/^/big=/' >> "$KICI_OUTPUT"`},
	}}
	res, _ := runJob(t, job, nil)
	if res.State != status.JobFailed || !strings.Contains(res.Error, `step "flood" wrote more than the 1048576 bytes of outputs`) {
		t.Fatalf("state = %s, error = %q", res.State, res.Error)
	}
	if res.Outputs["a"] != "small" {
		t.Fatalf("outputs = %q", res.Outputs)
	}
}

// TestSetupError: a dispatch-time error fails the job before any step.
func TestSetupError(t *testing.T) {
	res, _ := runJob(t, lockfile.Job{Steps: []lockfile.Step{{Name: "s", Run: "true"}}}, &protocol.JobDispatch{SetupError: "env X: boom"})
	if res.State != status.JobFailed || res.Error != "env X: boom" || res.Steps[0].Status != status.StepSkipped {
		t.Fatalf("res = %+v", res)
	}
}
