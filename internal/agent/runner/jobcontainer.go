package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"kici.dev/kici/internal/agent/logstream"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/protocol"
)

// Job containers and services (kici; KiCI LockJob.container). Each step of a
// job with `container:` runs in a fresh container of that image, created
// from the job's work directory bind-mounted at the same path, so paths,
// scripts and outputs are the ones the bare-metal runner uses; the steps
// share the work directory, not a process tree, which keeps the cancel
// semantics of bare metal: the step's container is its process group
// (SIGTERM, grace, SIGKILL through the Engine). Services run for the whole
// job on a private network, where the step containers reach them by name.

// Labels on every container and network of a job, so an operator (or a
// later sweep) can find what a lost agent left behind.
const (
	LabelJobID      = "kici-job-id"
	LabelJobManaged = "kici-job-container"
)

// Service health-check defaults when the lock sets none.
const (
	DefaultHealthInterval = time.Second
	DefaultHealthRetries  = 30
)

// containerCleanupTimeout bounds the removal of a job's containers and
// network, which runs even after the job's context ended.
const containerCleanupTimeout = 30 * time.Second

// jobContainers is the Docker state of one job.
type jobContainers struct {
	cli      *client.Client
	spec     *lockfile.Container
	network  string   // network id ("" before it exists)
	services []string // service container ids
	// refs name the started services, for their logs (servicelogs.go).
	refs   []serviceRef
	labels map[string]string
	// endReaper closes the reaper's lifeline (nil without a reaper).
	endReaper func()
}

// startContainers prepares a job's container execution: the Engine, the
// job network and its health-checked services. What it created is recorded
// in j.ctr at once, so stopContainers removes it even when a later part
// fails.
func (j *job) startContainers(log *logstream.Stream) error {
	if j.cfg.Container == nil && len(j.cfg.Services) == 0 {
		return nil
	}
	if j.cfg.Container == nil {
		// On the host the service names would not resolve; running the
		// steps there would quietly give them another environment.
		return errors.New("services need a job container (`container:`): the steps reach them by name on the job's network")
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return fmt.Errorf("job container: docker client: %w", err)
	}
	ctx, cancel := context.WithTimeout(j.ctx, 10*time.Second)
	_, err = cli.Ping(ctx, client.PingOptions{})
	cancel()
	if err != nil {
		cli.Close()
		return fmt.Errorf("job container: this agent has no reachable Docker Engine: %w", err)
	}
	c := &jobContainers{cli: cli, spec: j.cfg.Container,
		labels: map[string]string{LabelJobManaged: "true", LabelJobID: j.d.JobID}}
	j.ctr = c
	if c.endReaper, err = j.startReaper(); err != nil { // containerreaper.go
		return err
	}
	name := "kici-job-" + shortID(j.d.JobID)
	net, err := cli.NetworkCreate(j.ctx, name, client.NetworkCreateOptions{Driver: "bridge", Labels: c.labels})
	if err != nil {
		return fmt.Errorf("job network: %w", err)
	}
	c.network = net.ID
	log.AddLine("", "Job network "+name)
	if b := c.spec.Build; b != nil { // containerbuild.go
		log.AddLine("", "Container image: built in the step "+protocol.ContainerBuildStepName)
		tag, err := j.buildStep(cli, b)
		if err != nil {
			return err
		}
		spec := *c.spec
		spec.Image, spec.Build = tag, nil
		c.spec = &spec
	}
	images := []string{c.spec.Image}
	for _, s := range j.cfg.Services {
		images = append(images, s.Image)
	}
	for _, img := range images {
		if err := c.ensureImage(j.ctx, img, log); err != nil {
			return err
		}
	}
	for _, s := range j.cfg.Services {
		if err := j.startService(c, s, log); err != nil {
			return fmt.Errorf("service %q: %w", s.Name, err)
		}
	}
	return nil
}

func shortID(id string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(id) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			b.WriteRune(r)
		}
	}
	s := b.String()
	if len(s) > 40 {
		s = s[:40]
	}
	return s
}

// ensureImage uses a local image, pulling it only when it is missing.
func (c *jobContainers) ensureImage(ctx context.Context, img string, log *logstream.Stream) error {
	if _, err := c.cli.ImageInspect(ctx, img); err == nil {
		return nil
	}
	log.AddLine("", "Pulling "+img)
	rc, err := c.cli.ImagePull(ctx, img, client.ImagePullOptions{})
	if err != nil {
		return fmt.Errorf("image %s: %w", img, err)
	}
	defer rc.Close()
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return fmt.Errorf("image %s: %w", img, err)
	}
	if _, err := c.cli.ImageInspect(ctx, img); err != nil {
		return fmt.Errorf("image %s: %w", img, err)
	}
	return nil
}

// startService runs s on the job network under its name and waits until
// its health command succeeds.
func (j *job) startService(c *jobContainers, s lockfile.Service, log *logstream.Stream) error {
	env := make([]string, 0, len(s.Env))
	for k, v := range s.Env {
		env = append(env, k+"="+v)
	}
	res, err := c.cli.ContainerCreate(j.ctx, client.ContainerCreateOptions{
		Config: &container.Config{Image: s.Image, Cmd: s.Command, Env: env, Labels: c.labels, Hostname: s.Name},
		HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode(c.network),
			Init: ptr(true)},
		NetworkingConfig: &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
			c.network: {Aliases: []string{s.Name}},
		}},
	})
	if err != nil {
		return err
	}
	c.services = append(c.services, res.ID)
	if _, err := c.cli.ContainerStart(j.ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		return err
	}
	ref := serviceRef{id: res.ID, name: s.Name, image: s.Image}
	c.refs = append(c.refs, ref)
	log.AddLine("", fmt.Sprintf("Service %s started (%s)", s.Name, s.Image))
	if s.Health == nil || len(s.Health.Cmd) == 0 {
		return nil
	}
	interval, retries := DefaultHealthInterval, DefaultHealthRetries
	if s.Health.Interval > 0 {
		interval = time.Duration(s.Health.Interval) * time.Millisecond
	}
	if s.Health.Retries > 0 {
		retries = s.Health.Retries
	}
	var last string
	for try := 1; try <= retries; try++ {
		code, err := c.exec(j.ctx, res.ID, s.Health.Cmd)
		if err == nil && code == 0 {
			log.AddLine("", fmt.Sprintf("Service %s healthy", s.Name))
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = "exit code " + strconv.Itoa(code)
		}
		select {
		case <-j.ctx.Done():
			return j.ctx.Err()
		case <-time.After(interval):
		}
	}
	c.serviceLogs(ref, log) // why it never became healthy
	return fmt.Errorf("not healthy after %d checks (%s)", retries, last)
}

// exec runs argv in container id and returns its exit code.
func (c *jobContainers) exec(ctx context.Context, id string, argv []string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ex, err := c.cli.ExecCreate(ctx, id, client.ExecCreateOptions{Cmd: argv})
	if err != nil {
		return -1, err
	}
	if _, err := c.cli.ExecStart(ctx, ex.ID, client.ExecStartOptions{Detach: true}); err != nil {
		return -1, err
	}
	for {
		in, err := c.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
		if err != nil {
			return -1, err
		}
		if !in.Running {
			return in.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stopContainers removes the job's services and network, on every path.
func (j *job) stopContainers() {
	c := j.ctr
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), containerCleanupTimeout)
	defer cancel()
	for _, id := range c.services {
		if _, err := c.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			j.r.opts.Logger.Warn("could not remove service container", "id", id, "err", err)
		}
	}
	if c.network != "" {
		if _, err := c.cli.NetworkRemove(ctx, c.network, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			j.r.opts.Logger.Warn("could not remove job network", "id", c.network, "err", err)
		}
	}
	if c.endReaper != nil {
		c.endReaper() // it removes whatever the removals above missed
	}
	c.cli.Close()
}

func ptr[T any](v T) *T { return &v }

// containerShellProbe runs a step script in a job container without a
// `shell:`: with bash when the image has it (the default shell, with the
// flags ShellArgv gives it), else with sh -e, so an image with only a
// POSIX shell (busybox, alpine) runs `run: echo hi` as written. The script
// path is $0; nothing of the step's text is spliced into this line.
const containerShellProbe = `if command -v bash >/dev/null 2>&1; then exec bash --noprofile --norc -eo pipefail "$0"; fi; exec sh -e "$0"`

// ContainerDefaultArgv is the argv of a step without `shell:` in a job
// container: sh probes for bash and runs the script with it, else with
// sh itself. A step that names `shell: bash` gets bash and no fallback.
func ContainerDefaultArgv(scriptFile string) []string {
	return []string{"sh", "-c", containerShellProbe, scriptFile}
}

// runContainerStep is runProcess for a job container: spec's argv runs in
// a new container of the job's image on the job network with the work
// directory mounted at its host path. Timeout and stop signal the
// container (SIGTERM, grace, SIGKILL); the container is always removed.
func (j *job) runContainerStep(spec procSpec, stop stopSignal) procResult {
	c := j.ctr
	ctx := context.Background() // the step's own end is decided below
	cfg := &container.Config{Image: c.spec.Image, Cmd: spec.Argv, Env: j.containerEnv(spec.Env),
		WorkingDir: spec.Dir, Labels: c.labels}
	hc := &container.HostConfig{NetworkMode: container.NetworkMode(c.network), Init: ptr(true),
		Binds: []string{j.workDir + ":" + j.workDir}}
	if err := applyContainerOptions(cfg, hc, c.spec.Options); err != nil {
		return procResult{ExitCode: -1, StartErr: err}
	}
	res, err := c.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: cfg, HostConfig: hc})
	if err != nil {
		return procResult{ExitCode: -1, StartErr: err}
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), containerCleanupTimeout)
		defer cancel()
		_, _ = c.cli.ContainerRemove(rctx, res.ID, client.ContainerRemoveOptions{Force: true})
	}()
	att, err := c.cli.ContainerAttach(ctx, res.ID, client.ContainerAttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return procResult{ExitCode: -1, StartErr: err}
	}
	defer att.Close()
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = stdcopy.StdCopy(spec.Stdout, spec.Stderr, att.Reader)
	}()
	wr := c.cli.ContainerWait(ctx, res.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := c.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		return procResult{ExitCode: -1, StartErr: err}
	}
	kill := func(sig string) {
		_, _ = c.cli.ContainerKill(ctx, res.ID, client.ContainerKillOptions{Signal: sig})
	}
	var out procResult
	exit := -1
	wait := func() {
		select {
		case r := <-wr.Result:
			exit = int(r.StatusCode)
		case <-wr.Error:
		}
	}
	terminate := func(grace time.Duration) {
		kill("SIGTERM")
		g := time.NewTimer(grace)
		defer g.Stop()
		select {
		case r := <-wr.Result:
			exit = int(r.StatusCode)
			return
		case <-wr.Error:
			return
		case <-g.C:
		case <-stop.Force:
		}
		kill("SIGKILL")
		wait()
	}
	var timeout <-chan time.Time
	if spec.Timeout > 0 {
		t := time.NewTimer(spec.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case r := <-wr.Result:
		exit = int(r.StatusCode)
	case err := <-wr.Error:
		out.StartErr = err
	case <-timeout:
		out.TimedOut = true
		terminate(spec.TimeoutGrace)
	case <-stop.Stop:
		out.Stopped = true
		terminate(stop.Grace())
	case <-stop.Force:
		out.Stopped = true
		kill("SIGKILL")
		wait()
	}
	select { // the attach stream ends with the container
	case <-copied:
	case <-time.After(outputIdle):
		att.Close()
		<-copied
	}
	out.ExitCode = exit
	return out
}

// applyContainerOptions applies the lock's `options` (flags from
// lockfile.ContainerOptions, "--flag=value" or "--flag value"; the compiler
// refused every other flag, and this refuses them again).
func applyContainerOptions(cfg *container.Config, hc *container.HostConfig, opts []string) error {
	for i := 0; i < len(opts); i++ {
		flag, val, ok := strings.Cut(opts[i], "=")
		if !ok && i+1 < len(opts) {
			i++
			val = opts[i]
		}
		switch flag {
		case "--user":
			cfg.User = val
		case "--workdir":
			// The step's working directory is the workspace; a job that
			// wants another one sets workingDirectory on its steps.
		case "--entrypoint":
			cfg.Entrypoint = []string{val}
		case "--memory":
			n, err := parseBytes(val)
			if err != nil {
				return fmt.Errorf("container option %s: %w", flag, err)
			}
			hc.Memory = n
		case "--cpus":
			f, err := strconv.ParseFloat(val, 64)
			if err != nil || f <= 0 {
				return fmt.Errorf("container option %s: bad value %q", flag, val)
			}
			hc.NanoCPUs = int64(f * 1e9)
		case "--shm-size":
			n, err := parseBytes(val)
			if err != nil {
				return fmt.Errorf("container option %s: %w", flag, err)
			}
			hc.ShmSize = n
		case "--tmpfs":
			path, o, _ := strings.Cut(val, ":")
			if hc.Tmpfs == nil {
				hc.Tmpfs = map[string]string{}
			}
			hc.Tmpfs[path] = o
		default:
			return fmt.Errorf("container option %q is not allowed", opts[i])
		}
	}
	return nil
}

// parseBytes reads a docker size: digits with an optional b/k/m/g suffix.
func parseBytes(s string) (int64, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "g"):
		mult, s = 1<<30, strings.TrimSuffix(s, "g")
	case strings.HasSuffix(s, "m"):
		mult, s = 1<<20, strings.TrimSuffix(s, "m")
	case strings.HasSuffix(s, "k"):
		mult, s = 1<<10, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "b"):
		s = strings.TrimSuffix(s, "b")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

// containerEnv is a step's environment inside the job container: the
// container's `env`, then the step environment the bare-metal runner
// builds (the same allowlist, job and step env, secrets) without the
// host's PATH, which names host directories; the image's PATH stays.
func (j *job) containerEnv(env []string) []string {
	hostPath := lookupEnv(j.hostEnv, "PATH")
	out := make([]string, 0, len(env)+len(j.ctr.spec.Env))
	set := map[string]bool{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if k == "PATH" && v == hostPath {
			continue
		}
		set[k] = true
		out = append(out, kv)
	}
	for k, v := range j.ctr.spec.Env {
		if !set[k] {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// runAttempt runs one step attempt in the job container, or on the host
// when the job has none or the host is its pod (podcontainer.go).
func (j *job) runAttempt(spec procSpec, stop stopSignal) procResult {
	if j.ctr != nil {
		return j.runContainerStep(spec, stop)
	}
	if j.pod != nil {
		spec.Env = j.pod.podEnv(spec.Env, j.r.opts.HostEnv)
	}
	return runProcess(spec, stop)
}

// ownHome reports whether the job gets a HOME of its own inside its work
// directory: with the agent's JobHome option; always in a job container,
// where the host's HOME does not exist (the work directory is mounted, so
// the home and the caches restored into it are there); and always when
// steps run as another user than the agent's or in namespaces of their
// own (a non-root agent's user namespaces), so no job finds what an
// earlier one left in a shared home.
func (j *job) ownHome() bool {
	return j.r.opts.Blobs.JobHome || j.cfg.Container != nil || j.r.confined() || namespaced(j.r.opts.Supervisor)
}
