package runs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/expr"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// NewJobDispatch builds the job.dispatch of job from its run's rows: the
// identity fields, the KICI_* environment (matrix values as KICI_MATRIX_*,
// inputs as KICI_INPUT_*), the upstream jobs' outputs and statuses, the
// inputs and event for step conditions, and the job config with its env
// templates (`${{ … }}`) expanded. A template that cannot be evaluated
// becomes SetupError, which fails the job on the agent. Secrets, context
// variables and credentials are the caller's. The orchestrator's dispatcher
// and `kici run local` both build their messages here, so a job sees the
// same environment either way.
func NewJobDispatch(run *store.Run, rc *store.RunContext, job *store.Job, jobs []*store.Job, outputs map[string]map[string]string) *protocol.JobDispatch {
	env := map[string]string{
		"CI":                 "true",
		"KICI":               "true",
		"KICI_RUN_ID":        run.ID,
		"KICI_JOB_ID":        job.ID,
		"KICI_JOB_NAME":      job.JobName,
		"KICI_WORKFLOW_NAME": run.WorkflowName,
		"KICI_REPO":          run.RepoIdentifier,
		"KICI_REF":           run.Ref,
		"KICI_SHA":           run.SHA,
		"KICI_ORG_ID":        run.OrgID,
	}
	for k, v := range job.MatrixValues {
		env["KICI_MATRIX_"+EnvKey(k)] = v
	}
	cenv := ConditionEnv(run, rc, job, jobs, outputs)
	for k, v := range cenv.Inputs {
		env["KICI_INPUT_"+EnvKey(k)] = InputString(v)
	}
	msg := &protocol.JobDispatch{
		Type: protocol.TypeJobDispatch, MessageID: uuid.NewString(),
		RunID: run.ID, JobID: job.ID, JobName: job.JobName, WorkflowName: run.WorkflowName,
		RepoURL: run.RepoURL, Ref: run.Ref, SHA: run.SHA,
		JobConfig: job.Config, MatrixValues: job.MatrixValues, Env: env,
		Inputs: cenv.Inputs,
		Event: &protocol.EventInfo{Type: string(run.TriggerType), Actor: run.TriggeredBy, Repo: run.RepoIdentifier,
			TargetBranch: run.TargetBranch, ChangedPaths: cenv.Event.ChangedPaths},
		Timestamp: time.Now().UnixMilli(),
	}
	if len(cenv.Needs) > 0 {
		msg.UpstreamJobOutputs = map[string]map[string]string{}
		msg.UpstreamJobStatuses = map[string]status.Job{}
		for name, n := range cenv.Needs {
			msg.UpstreamJobStatuses[name] = status.Job(n.Result)
			if len(n.Outputs) > 0 {
				msg.UpstreamJobOutputs[name] = n.Outputs
			}
		}
	}
	cfg, deferred, err := ExpandTemplates(job.Config, cenv)
	if err != nil {
		msg.SetupError = err.Error()
	} else {
		msg.JobConfig, msg.StepEnvTemplates = cfg, deferred
	}
	return msg
}

// ExpandTemplates evaluates the `${{ … }}` templates in a lock job entry's
// env and its steps' env against env and returns the entry with the
// values replaced (unchanged bytes when there are none). A step env value
// that reads `steps` or `env` is left as written and its key returned in
// deferred (by step index): the agent expands it against the job's earlier
// steps just before the step runs. Only env values are expanded: `run:` scripts never are (the compiler refuses templates
// there), so a value reaches a script only as an environment variable.
func ExpandTemplates(config json.RawMessage, env expr.Env) (_ json.RawMessage, deferred map[int][]string, _ error) {
	if !bytes.Contains(config, []byte("${{")) {
		return config, nil, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(config, &top); err != nil {
		return nil, nil, fmt.Errorf("job config: %v", err)
	}
	step := -1 // the step whose env is being expanded, -1 for the job's
	expand := func(raw json.RawMessage, where string) (json.RawMessage, error) {
		var m map[string]string
		if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
			return raw, nil
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if step >= 0 && expr.UsesStepScope(m[k]) {
				if deferred == nil {
					deferred = map[int][]string{}
				}
				deferred[step] = append(deferred[step], k) // the agent expands it
				continue
			}
			v, err := expr.Interpolate(m[k], env)
			if err != nil {
				return nil, fmt.Errorf("%senv %s: %v", where, k, err)
			}
			m[k] = v
		}
		return json.Marshal(m)
	}
	var err error
	if top["env"], err = expand(top["env"], ""); err != nil {
		return nil, nil, err
	}
	if top["env"] == nil {
		delete(top, "env")
	}
	var steps []map[string]json.RawMessage
	if json.Unmarshal(top["steps"], &steps) == nil {
		for i, s := range steps {
			if _, ok := s["env"]; !ok {
				continue
			}
			var name string
			_ = json.Unmarshal(s["name"], &name)
			step = i
			if s["env"], err = expand(s["env"], fmt.Sprintf("step %q ", name)); err != nil {
				return nil, nil, err
			}
			steps[i] = s
		}
		if top["steps"], err = json.Marshal(steps); err != nil {
			return nil, nil, err
		}
	}
	for _, keys := range deferred {
		sort.Strings(keys)
	}
	out, err := json.Marshal(top)
	return out, deferred, err
}

// EnvKey upper-cases a matrix or input name and replaces anything but
// [A-Z0-9_] by _ (KICI_MATRIX_<KEY>, KICI_INPUT_<NAME>).
func EnvKey(k string) string {
	b := []byte(strings.ToUpper(k))
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// InputString is an input value as an environment variable: strings as
// they are, booleans as true/false, numbers in their shortest form, null
// as "".
func InputString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
