package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/client"
)

// ContainerReaperArg is the first argument that makes kici-agent run as the
// container reaper of one job (see Supervise). It is not a user-facing
// command.
const ContainerReaperArg = "__kici-container-reaper"

// Why a reaper. The agent removes a job's containers and network when the
// job ends, but a SIGKILLed agent runs no deferred code, and the service
// containers would keep running (and the network stay) forever. So while a
// container job runs, the agent binary re-executed with ContainerReaperArg
// and the job id waits on a lifeline pipe whose write end only the agent
// holds; when the pipe reports end of file — the agent closed it at the
// job's end, or died — the reaper removes every container and network
// labelled with that job id, then exits. It runs in its own process group
// so a signal to the agent's group does not take it along.

// startReaper starts the reaper of the job's containers when the agent has
// its own binary to re-execute (Options.AgentBinary); it returns the
// function that ends it (closing the lifeline), or nil without one.
func (j *job) startReaper() (func(), error) {
	if j.r.opts.AgentBinary == "" {
		return nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(j.r.opts.AgentBinary, ContainerReaperArg, j.d.JobID)
	// The agent's environment (DOCKER_HOST and the like) without its own
	// settings: the reaper needs no token or orchestrator address.
	cmd.Env = []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KICI_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.ExtraFiles = []*os.File{r}
	// Its complaints land in the agent's log, which outlives the agent.
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("container reaper: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	return func() { w.Close() }, nil
}

// reap is the reaper's main: wait for the lifeline to close, then remove
// what the job left.
func reap(args []string) int {
	if len(args) != 1 || args[0] == "" {
		fmt.Fprintln(os.Stderr, "kici container reaper: usage: job-id")
		return 2
	}
	if lifeline := os.NewFile(3, "lifeline"); lifeline != nil {
		_, _ = io.Copy(io.Discard, lifeline)
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kici container reaper:", err)
		return 1
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := RemoveJobObjects(ctx, cli, args[0]); err != nil {
		fmt.Fprintln(os.Stderr, "kici container reaper:", err)
		return 1
	}
	return 0
}

// RemoveJobObjects force-removes the containers, then the networks,
// labelled with jobID (LabelJobID), pass after pass until a listing finds
// none or ctx ends. One pass is not enough: a container the agent was
// still starting when it died cannot be removed until dockerd finishes the
// start, and the network cannot go while a container is attached to it.
// It returns nil when nothing is left, else an error naming what is.
func RemoveJobObjects(ctx context.Context, cli *client.Client, jobID string) error {
	f := make(client.Filters).Add("label", LabelJobID+"="+jobID)
	for {
		found, err := removeJobObjectsOnce(ctx, cli, f)
		if err == nil && found == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("%d containers or networks left", found)
			}
			return fmt.Errorf("job %s: %w", jobID, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// removeJobObjectsOnce is one pass of RemoveJobObjects: it returns how
// many labelled objects it found (and tried to remove), or the error of
// a listing.
func removeJobObjectsOnce(ctx context.Context, cli *client.Client, f client.Filters) (int, error) {
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return 0, err
	}
	for _, c := range cs.Items {
		_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return 0, err
	}
	for _, n := range ns.Items {
		_, _ = cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
	}
	return len(cs.Items) + len(ns.Items), nil
}
