package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/agent/envbuild"
	"kici.dev/kici/internal/agent/logstream"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/protocol"
)

func (j *job) newStream(stepIndex int) *logstream.Stream {
	return logstream.New(logstream.Options{
		MaxBytes: j.maxLog,
		Masker:   j.masker,
		Flush: func(lines []protocol.LogLine) {
			j.seqMu.Lock()
			seq := j.seq
			j.seq++
			if j.offsets == nil {
				j.offsets = map[int]int64{}
			}
			off := j.offsets[stepIndex]
			j.offsets[stepIndex] += int64(len(lines))
			// Send under the lock so chunks leave in seq order. Send may
			// block while the connection cannot keep up: that is the
			// backpressure that slows the step down.
			j.r.out.Send(&protocol.LogChunk{
				Type: protocol.TypeLogChunk, RunID: j.d.RunID, JobID: j.d.JobID,
				StepIndex: stepIndex, Seq: seq, Lines: lines, Timestamp: now(), Offset: &off,
			})
			j.seqMu.Unlock()
		},
	})
}

// replaceStream flushes old and returns a stream with the job's final
// masker and cap (used once those are known).
func (j *job) replaceStream(old *logstream.Stream, stepIndex int) *logstream.Stream {
	old.Close()
	return j.newStream(stepIndex)
}

func stepName(s lockfile.Step, i int) string {
	if s.Name != "" {
		return s.Name
	}
	return fmt.Sprintf("step-%d", i)
}

// runStep runs step i with its retries and reports it. A cleanup step
// (cleanup true: the job was already stopped) is not interrupted by the
// stop that triggered it, only by a forced stop, and is bounded by
// CleanupStepTimeout.
func (j *job) runStep(i int, cleanup bool) protocol.StepResult {
	r, d := j.r, j.d
	stopCh := j.stopCh
	if cleanup {
		stopCh = nil // a nil channel never fires
	}
	step := j.cfg.Steps[i]
	name := stepName(step, i)
	start := time.Now()
	log := j.newStream(i)
	defer log.Close()

	send := func(state status.Step, data *protocol.StepStatusData) {
		msg := &protocol.StepStatus{
			Type: protocol.TypeStepStatus, RunID: d.RunID, JobID: d.JobID, StepIndex: i,
			StepName: name, State: state, Timestamp: now(), Data: data,
		}
		if state != status.StepRunning {
			msg.LogBytesStreamed = log.BytesStreamed()
		}
		r.out.Send(msg)
	}
	finish := func(state status.Step, exit *int, attempt int, errMsg string) protocol.StepResult {
		log.Close()
		dur := time.Since(start)
		errMsg = j.masker.Mask(errMsg)
		send(state, &protocol.StepStatusData{ExitCode: exit, DurationMs: dur.Milliseconds(), Error: errMsg, Attempt: attempt})
		return protocol.StepResult{Name: name, Status: state, DurationMs: dur.Milliseconds(), Error: errMsg}
	}

	send(status.StepRunning, &protocol.StepStatusData{Attempt: 1})
	if strings.TrimSpace(step.Run) == "" {
		log.AddLine("", "Error: "+TypeScriptStepError)
		return finish(status.StepFailed, nil, 1, TypeScriptStepError)
	}
	dir, err := ResolveWorkingDir(j.srcDir, step.WorkingDirectory)
	if err != nil {
		log.AddLine("", "Error: "+err.Error())
		return finish(status.StepFailed, nil, 1, err.Error())
	}
	script := filepath.Join(j.scripts, fmt.Sprintf("step-%d.sh", i))
	if err := os.WriteFile(script, []byte(step.Run), 0o600); err != nil {
		return finish(status.StepFailed, nil, 1, "writing step script: "+err.Error())
	}
	if err := j.handOver(script); err != nil {
		return finish(status.StepFailed, nil, 1, err.Error())
	}
	argv, err := ShellArgv(step.Shell, script)
	if err == nil && (j.ctr != nil || j.pod != nil) && step.Shell == "" {
		argv = ContainerDefaultArgv(script) // jobcontainer.go: bash if the image has it, else sh
	}
	if err != nil {
		log.AddLine("", "Error: "+err.Error())
		return finish(status.StepFailed, nil, 1, err.Error())
	}
	extra, err := j.outputEnv(i, j.attestEnv(j.gitCredentialEnv(j.userEnv(map[string]string{"TMPDIR": j.tmpDir}))))
	if err == nil && j.outs != nil {
		err = j.handOver(j.outs.dir)
	}
	if err != nil {
		return finish(status.StepFailed, nil, 1, "creating the output file: "+err.Error())
	}
	env := envbuild.Build(envbuild.Layers{
		Host: j.hostEnv, Dispatch: d.Env, Context: d.ContextVars, Workspace: j.srcDir,
		Extra: extra,
		Job:   j.cfg.Env, Step: step.Env,
	})
	if env, err = withSecrets(env, j.cfg.Secrets, step.Secrets, d.Secrets); err != nil {
		log.AddLine("", "Error: "+err.Error())
		return finish(status.StepFailed, nil, 1, err.Error())
	}
	timeout := r.opts.DefaultStepTimeout
	if step.Timeout > 0 {
		timeout = time.Duration(step.Timeout) * time.Millisecond
	}
	if cleanup {
		timeout = min(timeout, CleanupStepTimeout)
	}
	attempts := MaxAttempts(step.Retry)
	var exit int
	var errMsg string
	for attempt := 1; attempt <= attempts; attempt++ {
		if attempt > 1 {
			wait := RetryDelay(step.Retry, attempt-1)
			log.AddLine("", fmt.Sprintf("Retrying in %s (attempt %d of %d)", wait, attempt, attempts))
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-stopCh:
				t.Stop()
				return finish(j.stoppedState(), &exit, attempt-1, j.stopError())
			case <-j.forceCh:
				t.Stop()
				return finish(status.StepCancelled, &exit, attempt-1, j.stopError())
			}
			send(status.StepRunning, &protocol.StepStatusData{Attempt: attempt})
		}
		// One writer for both: the step's stdout and stderr share one pipe,
		// so its log keeps the order in which the step wrote.
		out := log.Writer(logstream.Stdout)
		pr := j.runAttempt(procSpec{
			Argv: argv, Dir: dir, Env: env,
			Stdout: out, Stderr: out,
			Timeout: timeout, TimeoutGrace: r.opts.TimeoutGrace,
			Supervisor: r.opts.Supervisor, View: j.viewFlags(), User: j.ident.User,
		}, stopSignal{Stop: stopCh, Force: j.forceCh, Grace: func() time.Duration { return j.grace }})
		exit = pr.ExitCode
		switch {
		case pr.StartErr != nil:
			errMsg = "could not start step: " + pr.StartErr.Error()
		case pr.Stopped:
			log.AddLine("", "Step stopped: "+j.stopError())
			return finish(j.stoppedState(), &exit, attempt, j.stopError())
		case pr.TimedOut:
			errMsg = fmt.Sprintf("step timed out after %s", timeout)
			log.AddLine("", errMsg)
		case exit == 0:
			if err := j.collectOutputs(i, name); err != nil {
				log.AddLine("", "Error: "+err.Error())
				return finish(status.StepFailed, &exit, attempt, err.Error())
			}
			if err := j.attestDeclared(i, log); err != nil {
				return finish(status.StepFailed, &exit, attempt, err.Error())
			}
			return finish(status.StepSuccess, &exit, attempt, "")
		default:
			errMsg = fmt.Sprintf("exit code %d", exit)
		}
	}
	if step.ContinueOnError {
		log.AddLine("", "Step failed; continuing (continueOnError)")
	}
	return finish(status.StepFailed, &exit, attempts, errMsg)
}
