package runner

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/expr"
	"kici.dev/kici/internal/protocol"
)

// EnvOutput names the file a step appends its outputs to.
const EnvOutput = "KICI_OUTPUT"

// outputKey is what a key written to $KICI_OUTPUT may look like (the
// compiler accepts the same for `outputs:` references).
var outputKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// outputState collects the outputs the job's steps wrote, by step name.
type outputState struct {
	dir   string
	steps map[string]map[string]string
	bytes int
}

// ParseOutputs parses a $KICI_OUTPUT file: `key=value` lines, and for
// multi-line values `key<<DELIMITER`, the value's lines, then a line that
// is exactly DELIMITER (the GitHub Actions format, so existing scripts
// work). Blank lines are ignored; a later write of a key wins. Errors name
// the 1-based line.
func ParseOutputs(data []byte) (map[string]string, error) {
	out := map[string]string{}
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" {
			continue
		}
		eq := strings.IndexByte(line, '=')
		hd := strings.Index(line, "<<")
		if hd >= 0 && (eq < 0 || hd < eq) {
			key, delim := line[:hd], line[hd+2:]
			if !outputKey.MatchString(key) {
				return nil, fmt.Errorf("line %d: %q is not a valid output name (letters, digits, _ and -)", i+1, key)
			}
			if strings.TrimSpace(delim) == "" {
				return nil, fmt.Errorf("line %d: %s<< needs a delimiter", i+1, key)
			}
			start := i + 1
			end := -1
			for k := start; k < len(lines); k++ {
				if lines[k] == delim {
					end = k
					break
				}
			}
			if end < 0 {
				return nil, fmt.Errorf("line %d: no closing %q for %s", i+1, delim, key)
			}
			out[key] = strings.Join(lines[start:end], "\n")
			i = end
			continue
		}
		if eq < 0 {
			return nil, fmt.Errorf("line %d: expected key=value or key<<DELIMITER", i+1)
		}
		key := line[:eq]
		if !outputKey.MatchString(key) {
			return nil, fmt.Errorf("line %d: %q is not a valid output name (letters, digits, _ and -)", i+1, key)
		}
		out[key] = line[eq+1:]
	}
	return out, nil
}

// outputEnv creates step i's empty output file and adds its path to extra
// as KICI_OUTPUT.
func (j *job) outputEnv(i int, extra map[string]string) (map[string]string, error) {
	if j.outs == nil {
		j.outs = &outputState{dir: filepath.Join(j.workDir, "outputs"), steps: map[string]map[string]string{}}
		if err := os.MkdirAll(j.outs.dir, 0o700); err != nil {
			return extra, err
		}
	}
	path := filepath.Join(j.outs.dir, fmt.Sprintf("step-%d", i))
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		return extra, err
	}
	extra[EnvOutput] = path
	return extra, nil
}

// collectOutputs reads what step i (named name) wrote to its output file.
// The job's steps share one MaxJobOutputBytes budget; a step that goes over
// it, or writes a malformed file, fails with an error naming it. Values are
// masked (a value containing a secret is stored with the secret replaced).
func (j *job) collectOutputs(i int, name string) error {
	if j.outs == nil {
		return nil
	}
	f, err := os.Open(filepath.Join(j.outs.dir, fmt.Sprintf("step-%d", i)))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("step %q removed its $%s file", name, EnvOutput)
		}
		return err
	}
	defer f.Close()
	left := protocol.MaxJobOutputBytes - j.outs.bytes
	data, err := io.ReadAll(io.LimitReader(f, int64(left)+1))
	if err != nil {
		return fmt.Errorf("step %q: reading $%s: %v", name, EnvOutput, err)
	}
	if len(data) > left {
		return fmt.Errorf("step %q wrote more than the %d bytes of outputs a job may produce in all (KICI_OUTPUT)", name, protocol.MaxJobOutputBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	vals, err := ParseOutputs(data)
	if err != nil {
		return fmt.Errorf("step %q: $%s %v", name, EnvOutput, err)
	}
	j.outs.bytes += len(data)
	for k, v := range vals {
		vals[k] = j.masker.Mask(v)
	}
	j.outs.steps[name] = vals
	return nil
}

// jobOutputs resolves the job's declared outputs ("<step>.<key>") from what
// the steps wrote; undeclared step outputs stay on the agent.
func (j *job) jobOutputs() map[string]string {
	if len(j.cfg.Outputs) == 0 || j.outs == nil {
		return nil
	}
	out := map[string]string{}
	for name, ref := range j.cfg.Outputs {
		step, key, _ := strings.Cut(ref, ".")
		if v, ok := j.outs.steps[step][key]; ok {
			out[name] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// stepEnv is what step conditions and step env templates see: the
// dispatch's event, inputs, matrix and upstream jobs, the job's earlier
// steps (outcome and outputs) and the job's environment (`env`: the KICI_*
// job variables, context variables and the job's `env:`; never secrets).
func (j *job) stepEnv(res *Result, upto int) expr.StepEnv {
	d := j.d
	env := expr.StepEnv{Env: expr.Env{
		Event:  expr.Event{Ref: d.Ref, SHA: d.SHA},
		Inputs: d.Inputs, Matrix: d.MatrixValues, Needs: map[string]expr.Need{},
	}, Steps: map[string]expr.Step{}, JobEnv: map[string]string{}}
	for _, layer := range []map[string]string{d.Env, d.ContextVars, j.cfg.Env} {
		for k, v := range layer {
			env.JobEnv[k] = v
		}
	}
	if e := d.Event; e != nil {
		env.Event.Type, env.Event.Actor, env.Event.Repo = e.Type, e.Actor, e.Repo
		env.Event.TargetBranch, env.Event.ChangedPaths = e.TargetBranch, e.ChangedPaths
	}
	if b, ok := strings.CutPrefix(d.Ref, "refs/heads/"); ok {
		env.Event.Branch = b
	}
	if t, ok := strings.CutPrefix(d.Ref, "refs/tags/"); ok {
		env.Event.Tag = t
	}
	for name, st := range d.UpstreamJobStatuses {
		env.Needs[name] = expr.Need{Result: string(st), Outputs: d.UpstreamJobOutputs[name]}
	}
	for i := 0; i < upto && i < len(res.Steps); i++ {
		s := expr.Step{Outcome: string(res.Steps[i].Status)}
		if j.outs != nil {
			s.Outputs = j.outs.steps[res.Steps[i].Name]
		}
		env.Steps[res.Steps[i].Name] = s
	}
	return env
}

// stepEnvError is a step env template that could not be expanded.
type stepEnvError struct{ err error }

func (e *stepEnvError) Error() string { return e.err.Error() }

// stepCondition evaluates step i's `if` (true when it has none), then
// expands the step's env templates left for the agent (a failure there
// is a *stepEnvError).
func (j *job) stepCondition(i int, res *Result) (bool, error) {
	if cond := j.cfg.Steps[i].If; cond != "" {
		ok, err := expr.EvalString(cond, j.stepEnv(res, i))
		if err != nil || !ok {
			return ok, err
		}
	}
	if err := j.expandStepEnv(i, res); err != nil {
		return false, &stepEnvError{err}
	}
	return true, nil
}

// expandStepEnv expands the templates of step i's env that the
// orchestrator left for the agent (JobDispatch.StepEnvTemplates: those
// reading `steps` or `env`) against the earlier steps, just before the
// step runs. Only those keys: a value the orchestrator expanded is data,
// even if a branch name or an output put "${{" in it. The values become
// environment variables, never script text.
func (j *job) expandStepEnv(i int, res *Result) error {
	keys := j.d.StepEnvTemplates[i]
	if len(keys) == 0 {
		return nil
	}
	st := &j.cfg.Steps[i]
	st.Env = maps.Clone(st.Env)
	env := j.stepEnv(res, i)
	for _, k := range keys {
		v, ok := st.Env[k]
		if !ok {
			continue
		}
		out, err := expr.Interpolate(v, env)
		if err != nil {
			return fmt.Errorf("env %s: %v", k, err)
		}
		st.Env[k] = out
	}
	return nil
}

// conditionSkip reports step i as skipped because its `if` was false, or
// as failed when the condition could not be evaluated (err).
func (j *job) conditionSkip(i int, err error) protocol.StepResult {
	name := stepName(j.cfg.Steps[i], i)
	state, msg := status.StepSkipped, "condition_false: if "+j.cfg.Steps[i].If
	var envErr *stepEnvError
	switch {
	case errors.As(err, &envErr):
		state, msg = status.StepFailed, j.masker.Mask("env_error: "+envErr.err.Error())
	case err != nil:
		state, msg = status.StepFailed, j.masker.Mask("condition_error: "+err.Error())
	}
	j.r.out.Send(&protocol.StepStatus{
		Type: protocol.TypeStepStatus, RunID: j.d.RunID, JobID: j.d.JobID, StepIndex: i,
		StepName: name, State: state, Timestamp: now(), Data: &protocol.StepStatusData{Error: msg},
	})
	return protocol.StepResult{Name: name, Status: state, Error: msg}
}
