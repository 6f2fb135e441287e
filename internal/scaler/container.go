package scaler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// Container labels set on every agent container (KiCI).
const (
	LabelManaged    = "kici-managed"
	LabelScalerName = "kici-scaler-name"
	LabelAgentID    = "kici-agent-id"
	LabelLabels     = "kici-labels"
	LabelBoundJob   = "kici-bound-job-id"
	LabelRunID      = "kici-run-id"
)

// AgentNetwork is the bridge network agent containers join, with its
// subnet and gateway (KiCI's values).
const (
	AgentNetwork        = "kici-agent-net"
	AgentNetworkSubnet  = "172.30.0.0/16"
	AgentNetworkGateway = "172.30.0.1"
)

// ContainerPidsLimit is the PidsLimit of every agent container (KiCI).
const ContainerPidsLimit = 4096

// ContainerOptions configure container backends.
type ContainerOptions struct {
	// StopGrace is the stop timeout before the engine kills the container
	// (default 10 s, KiCI).
	StopGrace time.Duration
	// Logger logs spawns, exits and orphan removals.
	Logger *slog.Logger
}

// Container runs agents as Docker containers through the Docker Engine API
// (KiCI container backend): on the bridge network kici-agent-net,
// labelled kici-managed/kici-scaler-name/kici-agent-id, limited by the
// label set's resources (Memory, NanoCpus) and PidsLimit 4096, removed when
// the agent ends or is destroyed. Containers of this scaler that it does
// not track are removed at construction (orchestrator start, reload) and
// by ReapOrphans.
type Container struct {
	name   string
	cli    *client.Client
	opts   ContainerOptions
	exited func(agentID string, err error)
	log    *slog.Logger

	mu     sync.Mutex
	ctrs   map[string]*ctr // by agent id
	closed bool
	reaped []string // agent ids of orphans removed, until LostAtStart
}

type ctr struct {
	id   string
	done chan struct{}
	// released: handed over (Release); left running, not removed here.
	released bool
}

// NewContainer connects to the Docker Engine of entry (socketPath, else
// DOCKER_HOST, else /var/run/docker.sock), checks it answers, makes sure
// the agent network exists, and removes this scaler's orphaned containers.
func NewContainer(e *Entry, opts ContainerOptions, exited func(agentID string, err error)) (*Container, error) {
	if opts.StopGrace <= 0 {
		opts.StopGrace = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	copts := []client.Opt{client.FromEnv}
	if e.SocketPath != "" {
		copts = append(copts, client.WithHost("unix://"+e.SocketPath))
	}
	cli, err := client.New(copts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	c := &Container{name: e.Name, cli: cli, opts: opts, exited: exited, log: opts.Logger.With("scaler", e.Name), ctrs: map[string]*ctr{}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		cli.Close()
		return nil, fmt.Errorf("docker engine unreachable: %w", err)
	}
	if err := c.ensureNetwork(ctx); err != nil {
		cli.Close()
		return nil, err
	}
	if n, err := c.ReapOrphans(ctx); err != nil {
		c.log.Warn("orphan cleanup", "err", err)
	} else if n > 0 {
		c.log.Info("removed orphaned agent containers", "count", n)
	}
	return c, nil
}

// ensureNetwork creates kici-agent-net when missing (a concurrent create
// is fine).
func (c *Container) ensureNetwork(ctx context.Context) error {
	if _, err := c.cli.NetworkInspect(ctx, AgentNetwork, client.NetworkInspectOptions{}); err == nil {
		return nil
	} else if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("inspect network %s: %w", AgentNetwork, err)
	}
	_, err := c.cli.NetworkCreate(ctx, AgentNetwork, client.NetworkCreateOptions{
		Driver: "bridge",
		IPAM: &network.IPAM{Config: []network.IPAMConfig{{
			Subnet: netip.MustParsePrefix(AgentNetworkSubnet), Gateway: netip.MustParseAddr(AgentNetworkGateway)}}},
		Labels: map[string]string{LabelManaged: "true"},
	})
	if err != nil && !cerrdefs.IsConflict(err) {
		return fmt.Errorf("create network %s: %w", AgentNetwork, err)
	}
	return nil
}

// ensureImage applies the pull policy: Never requires the image locally,
// IfNotPresent pulls only when missing, Always pulls.
func (c *Container) ensureImage(ctx context.Context, ls *LabelSet, emit func(EventType, string)) error {
	_, err := c.cli.ImageInspect(ctx, ls.Image)
	present := err == nil
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("inspect image %s: %w", ls.Image, err)
	}
	switch {
	case ls.ImagePullPolicy == "Never" && !present:
		return fmt.Errorf("image %s is not present and imagePullPolicy is Never", ls.Image)
	case ls.ImagePullPolicy == "Always" || !present:
		emit(EventProvisioning, "pulling image "+ls.Image)
		rc, err := c.cli.ImagePull(ctx, ls.Image, client.ImagePullOptions{})
		if err != nil {
			return fmt.Errorf("pull %s: %w", ls.Image, err)
		}
		defer rc.Close()
		if _, err := io.Copy(io.Discard, rc); err != nil {
			return fmt.Errorf("pull %s: %w", ls.Image, err)
		}
		emit(EventProvisioning, "pulled image "+ls.Image)
	}
	return nil
}

// Spawn pulls (per policy), creates and starts the agent container; on
// any failure the container is removed. ctx cancels the engine calls.
func (c *Container) Spawn(ctx context.Context, req *SpawnRequest) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return errors.New("backend is shutting down")
	}
	bridged := *req
	bridged.OrchestratorURL = agentURL(req.OrchestratorURL, AgentNetworkGateway)
	req = &bridged
	if err := c.ensureImage(ctx, req.LabelSet, req.Emit); err != nil {
		return err
	}
	labels := map[string]string{
		LabelManaged: "true", LabelScalerName: c.name, LabelAgentID: req.AgentID,
		LabelLabels: strings.Join(req.LabelSet.Labels, ","),
	}
	if req.JobID != "" {
		labels[LabelBoundJob] = req.JobID
		labels[LabelRunID] = req.RunID
	}
	// The token is written to the agent's standard input (read once to
	// its end, KICI_AGENT_TOKEN_FD=0), never put in the container's
	// environment: that would show in `docker inspect` and in the agent's
	// /proc/<pid>/environ, which the job's steps could read.
	var env []string
	for _, kv := range agentVars(req, nil) {
		if !strings.HasPrefix(kv, "KICI_AGENT_TOKEN=") {
			env = append(env, kv)
		}
	}
	env = append(env, "KICI_WORK_DIR=/tmp", "KICI_AGENT_TOKEN_FD=0",
		// The container is the confinement: its agent may run fork jobs
		// whatever user the image runs it as.
		"KICI_ALLOW_UNCONFINED_STEPS=true")
	pids := int64(ContainerPidsLimit)
	res, err := c.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: req.AgentID,
		Config: &container.Config{
			Image: req.LabelSet.Image, Env: env, Labels: labels, Hostname: req.AgentID,
			OpenStdin: true, StdinOnce: true, AttachStdin: true,
		},
		HostConfig: &container.HostConfig{
			NetworkMode: container.NetworkMode(AgentNetwork),
			Resources: container.Resources{
				Memory: req.Limits.MemoryBytes, NanoCPUs: req.Limits.NanoCPUs, PidsLimit: &pids,
			},
		},
	})
	if err != nil {
		return fmt.Errorf("create container: %w", err)
	}
	// undo removes the container and forgets it; every failure after the
	// create goes through it.
	undo := func(err error) error {
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = c.cli.ContainerRemove(rctx, res.ID, client.ContainerRemoveOptions{Force: true})
		c.mu.Lock()
		delete(c.ctrs, req.AgentID)
		c.mu.Unlock()
		return err
	}
	req.Emit(EventProvisioning, "agent container created from "+req.LabelSet.Image)
	// Track before start so the orphan sweep never takes it.
	cr := &ctr{id: res.ID, done: make(chan struct{})}
	c.mu.Lock()
	c.ctrs[req.AgentID] = cr
	c.mu.Unlock()
	att, err := c.cli.ContainerAttach(ctx, res.ID, client.ContainerAttachOptions{Stream: true, Stdin: true})
	if err != nil {
		return undo(fmt.Errorf("attach container stdin: %w", err))
	}
	defer att.Close()
	if _, err := c.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		return undo(fmt.Errorf("start container: %w", err))
	}
	_, err = io.WriteString(att.Conn, req.Token)
	if err == nil {
		err = att.CloseWrite()
	}
	if err != nil {
		return undo(fmt.Errorf("hand the agent its token: %w", err))
	}
	if err := ctx.Err(); err != nil {
		return undo(err)
	}
	c.log.Info("agent container started", "agent", req.AgentID, "job", req.JobID, "container", res.ID[:12])
	go c.watch(req.AgentID, cr)
	return nil
}

// watch waits for the container to stop, removes it and reports the exit.
func (c *Container) watch(agentID string, cr *ctr) {
	wr := c.cli.ContainerWait(context.Background(), cr.id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	var exitErr error
	select {
	case r := <-wr.Result:
		if r.StatusCode != 0 {
			exitErr = fmt.Errorf("agent container exited with status %d", r.StatusCode)
		}
	case err := <-wr.Error:
		exitErr = fmt.Errorf("wait for container: %w", err)
	}
	c.mu.Lock()
	released := cr.released
	c.mu.Unlock()
	if released {
		// Its job goes on elsewhere; whoever reaps exited orphans removes it.
		close(cr.done)
		return
	}
	rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_, err := c.cli.ContainerRemove(rctx, cr.id, client.ContainerRemoveOptions{Force: true})
	cancel()
	if err != nil && !cerrdefs.IsNotFound(err) {
		c.log.Warn("remove agent container", "agent", agentID, "err", err)
	}
	c.mu.Lock()
	delete(c.ctrs, agentID)
	c.mu.Unlock()
	c.log.Info("agent container ended", "agent", agentID, "err", exitErr)
	if c.exited != nil {
		c.exited(agentID, exitErr)
	}
	close(cr.done) // after the report: Destroy returns with the exit known
}

// Destroy stops the agent's container (StopGrace, then the engine kills
// it) and waits for it to be removed (bounded by ctx).
func (c *Container) Destroy(ctx context.Context, id string) error {
	c.mu.Lock()
	cr := c.ctrs[id]
	c.mu.Unlock()
	if cr == nil {
		return nil
	}
	secs := int(c.opts.StopGrace / time.Second)
	if _, err := c.cli.ContainerStop(ctx, cr.id, client.ContainerStopOptions{Timeout: &secs}); err != nil && !cerrdefs.IsNotFound(err) {
		_, _ = c.cli.ContainerRemove(ctx, cr.id, client.ContainerRemoveOptions{Force: true})
	}
	return waitEnded(ctx, cr.done)
}

// Release lets go of a running agent container (HandOver): Shutdown no
// longer stops it and it is not removed here when it exits. It reports
// false for an unknown id.
func (c *Container) Release(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	cr := c.ctrs[id]
	if cr == nil {
		return false
	}
	// Renamed, not relabelled (labels are fixed once created): this
	// node's next start must not remove it while its job runs elsewhere.
	rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err := c.cli.ContainerRename(rctx, cr.id, client.ContainerRenameOptions{NewName: id + HandedOverSuffix})
	cancel()
	if err != nil {
		c.log.Warn("agent container not handed over: rename failed; it is stopped with the node", "agent", id, "err", err)
		return false
	}
	cr.released = true
	delete(c.ctrs, id)
	c.log.Info("agent container handed over: it keeps running its job and reconnects to another node", "agent", id, "container", cr.id[:min(12, len(cr.id))])
	return true
}

// HandedOverSuffix ends the name of an agent container handed over by a
// stopping node (Release): <agent id>-handed-over.
const HandedOverSuffix = "-handed-over"

// ReapOrphans removes containers labelled with this scaler's name that it
// does not track (left by a killed orchestrator) and returns how many. A
// running container that was handed over is left alone: its agent runs
// its job through another node, then exits, and a later pass removes it
// (ReapExited).
func (c *Container) ReapOrphans(ctx context.Context) (int, error) {
	return c.reap(ctx, false)
}

// ReapExited removes the exited containers of this scaler that it does
// not track: agents handed over by a stopped node, or orphans of a killed
// one, that have ended since. The Manager calls it on every warm-pool
// pass.
func (c *Container) ReapExited(ctx context.Context) (int, error) {
	return c.reap(ctx, true)
}

func (c *Container) reap(ctx context.Context, exitedOnly bool) (int, error) {
	f := make(client.Filters).Add("label", LabelManaged+"=true", LabelScalerName+"="+c.name)
	if exitedOnly {
		f = f.Add("status", "exited")
	}
	list, err := c.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range list.Items {
		c.mu.Lock()
		cr := c.ctrs[s.Labels[LabelAgentID]]
		c.mu.Unlock()
		if cr != nil && cr.id == s.ID {
			continue
		}
		if s.State == container.StateRunning && handedOver(s.Names) {
			continue
		}
		if _, err := c.cli.ContainerRemove(ctx, s.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return n, fmt.Errorf("remove orphan %.12s: %w", s.ID, err)
		}
		c.log.Info("removed orphaned agent container", "container", s.ID[:12], "agent", s.Labels[LabelAgentID])
		if id := s.Labels[LabelAgentID]; id != "" && !exitedOnly {
			c.mu.Lock()
			c.reaped = append(c.reaped, id)
			c.mu.Unlock()
		}
		n++
	}
	return n, nil
}

// Shutdown refuses further spawns, stops and removes every agent container
// and closes the client (bounded by ctx).
func (c *Container) Shutdown(ctx context.Context) {
	c.mu.Lock()
	c.closed = true
	ids := slices.Collect(maps.Keys(c.ctrs))
	c.mu.Unlock()
	destroyAll(ctx, ids, c.Destroy)
	c.cli.Close()
}

// handedOver reports whether a container's names (as the engine lists
// them, "/name") mark it as handed over.
func handedOver(names []string) bool {
	for _, n := range names {
		if strings.HasSuffix(n, HandedOverSuffix) {
			return true
		}
	}
	return false
}
