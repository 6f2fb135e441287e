package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// staticLabel is the label of the benchmark's static agents and of the
// stat workflow's job: no scaler label set serves it, so only they take it.
const staticLabel = "bench-static"

// staticFleet is a set of kici-agent processes started by the benchmark,
// as an operator runs static agents (docs/deploy.md).
type staticFleet struct{ cmds []*exec.Cmd }

// startStaticAgents starts n kici-agent processes with one token for
// staticLabel against o and waits until all n are registered
// (kici_orch_agents_active counts them, after any spawned agent left).
func startStaticAgents(ctx context.Context, bin string, o *orch, root, engine string, n int) (*staticFleet, error) {
	if err := o.waitMetric(ctx, "kici_orch_agents_active", func(v float64) bool { return v == 0 }); err != nil {
		return nil, fmt.Errorf("spawned agents still connected: %w", err)
	}
	token, err := o.mintToken(staticLabel)
	if err != nil {
		return nil, err
	}
	f := &staticFleet{}
	for i := range n {
		dir, err := dataDir(root, fmt.Sprintf("%s-static-%d", engine, i))
		if err != nil {
			f.stop()
			return nil, err
		}
		// The agent runs steps as the step user, who must pass through.
		if err := os.Chmod(dir, 0o711); err != nil {
			f.stop()
			return nil, err
		}
		logf, err := os.Create(filepath.Join(dir, "agent.log"))
		if err != nil {
			f.stop()
			return nil, err
		}
		cmd := exec.Command(filepath.Join(bin, "kici-agent"))
		cmd.Env = append(cleanEnv(), "KICI_ORCHESTRATOR_URL=ws"+strings.TrimPrefix(o.url, "http")+"/ws", "KICI_AGENT_TOKEN="+token,
			fmt.Sprintf("KICI_AGENT_ID=bench-static-%d", i), "KICI_LABELS="+staticLabel,
			"KICI_WORK_DIR="+filepath.Join(dir, "work"))
		cmd.Stdout, cmd.Stderr = logf, logf
		err = cmd.Start()
		logf.Close() // the child holds its own descriptor
		if err != nil {
			f.stop()
			return nil, err
		}
		f.cmds = append(f.cmds, cmd)
	}
	if err := o.waitMetric(ctx, "kici_orch_agents_active", func(v float64) bool { return v >= float64(n) }); err != nil {
		f.stop()
		return nil, fmt.Errorf("static agents did not register (see %s): %w", filepath.Join(root, engine+"-static-0", "agent.log"), err)
	}
	return f, nil
}

// medianRSSKB is the median resident set size of the fleet's agents and
// the median of their anonymous part (rssParts), KiB.
func (f *staticFleet) medianRSSKB() (total, anon int) {
	var ts, as []int
	for _, c := range f.cmds {
		t, a := rssParts(c.Process.Pid)
		ts, as = append(ts, t), append(as, a)
	}
	slices.Sort(ts)
	slices.Sort(as)
	return ts[len(ts)/2], as[len(as)/2]
}

// stop ends every agent (SIGTERM, then SIGKILL after 20 s) and waits.
func (f *staticFleet) stop() {
	for _, c := range f.cmds {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range f.cmds {
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = c.Process.Kill()
			<-done
		}
	}
	f.cmds = nil
}

// metric reads one sample of o's /metrics, named with its labels as the
// exposition prints them (`kici_orch_agents_active`,
// `kici_orch_scaler_warm_pool_ready{scaler="local"}`); ok is false when it
// is absent.
func (o *orch) metric(name string) (v float64, ok bool, err error) {
	resp, err := o.http.Get(o.url + "/metrics")
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, false, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if s, found := strings.CutPrefix(line, name+" "); found {
			v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			return v, err == nil, err
		}
	}
	return 0, false, nil
}

// waitMetric waits up to a minute for the sample name to satisfy ok.
func (o *orch) waitMetric(ctx context.Context, name string, ok func(float64) bool) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		v, found, err := o.metric(name)
		if err == nil && found && ok(v) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s = %v: %w", name, v, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
