package runner

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"kici.dev/kici/internal/agent/logstream"
	"kici.dev/kici/internal/lockfile"
)

// A job's container in a Kubernetes pod (Options.InPod, set by
// KICI_AGENT_JOB_CONTAINER=pod; docs/kubernetes.md#inside-the-job-pod).
// The kubernetes scaler already made the pod the job's container: the
// agent runs inside the job's image, each service is a sibling container
// of the pod, and hostAliases name every service 127.0.0.1. So the agent
// starts nothing and never talks to Docker: steps run as processes here,
// as on bare metal, with the container's `env`, and before the first step
// it waits until each service's declared ports accept connections.

// podDialTimeout bounds one connection attempt to a service port: the
// port is on loopback, so an attempt either connects or is refused at
// once unless the pod's network is wedged.
const podDialTimeout = 2 * time.Second

// podContainer is what a job in a pod keeps of its `container:`.
type podContainer struct {
	// env is the container's `env` from the lock.
	env map[string]string
}

// startPodContainer is startContainers for a job whose pod is its
// container: it records the container's env for the steps, says in the
// job log what does not apply in a pod, and waits for the services.
func (j *job) startPodContainer(log *logstream.Stream) error {
	spec := j.cfg.Container
	if spec == nil && len(j.cfg.Services) == 0 {
		return nil
	}
	if spec == nil {
		return errors.New("services need a job container (`container:`): without one the kubernetes scaler does not put them in the job's pod")
	}
	if spec.Build != nil {
		return errors.New("job container: an image built from the repository (`container.build`) cannot run in a Kubernetes pod, whose image is chosen before the job starts; build and push it in an earlier job and name it with `container.image`")
	}
	j.pod = &podContainer{env: spec.Env}
	log.AddLine("", "Job container: this Kubernetes pod ("+spec.Image+"); steps run as processes in it")
	if len(spec.Options) > 0 {
		log.AddLine("", "Container options ignored in a Kubernetes pod (the pod spec decides user, resources and mounts): "+strings.Join(spec.Options, " "))
	}
	for _, s := range j.cfg.Services {
		if err := j.waitPodService(s, log); err != nil {
			return fmt.Errorf("service %q: %w", s.Name, err)
		}
	}
	return nil
}

// waitPodService waits until every port of s accepts a TCP connection on
// 127.0.0.1, trying each port once per health interval for at most the
// health retries (DefaultHealthInterval × DefaultHealthRetries when the
// lock sets none), and fails with the port that never answered. A
// service without ports cannot be checked: the log says it is not
// waited for. A health command is not run: it would run in the service's
// container, which a process of this one cannot enter.
func (j *job) waitPodService(s lockfile.Service, log *logstream.Stream) error {
	if s.Health != nil && len(s.Health.Cmd) > 0 {
		log.AddLine("", fmt.Sprintf("Service %s: its health command does not run in a Kubernetes pod; its ports are checked instead", s.Name))
	}
	if len(s.Ports) == 0 {
		log.AddLine("", fmt.Sprintf("Service %s declares no ports: not waited for", s.Name))
		return nil
	}
	interval, retries := DefaultHealthInterval, DefaultHealthRetries
	if s.Health != nil && s.Health.Interval > 0 {
		interval = time.Duration(s.Health.Interval) * time.Millisecond
	}
	if s.Health != nil && s.Health.Retries > 0 {
		retries = s.Health.Retries
	}
	pending := append([]int(nil), s.Ports...)
	var last error
	for try := 1; ; try++ {
		left := pending[:0]
		for _, p := range pending {
			if err := dialPort(j, p); err != nil {
				last = err
				left = append(left, p)
			}
		}
		pending = left
		if len(pending) == 0 {
			log.AddLine("", fmt.Sprintf("service %s ready", s.Name))
			return nil
		}
		if try >= retries {
			break
		}
		select {
		case <-j.ctx.Done():
			return j.ctx.Err()
		case <-time.After(interval):
		}
	}
	return fmt.Errorf("port %d on 127.0.0.1 did not accept connections after %d tries %s apart (%v)", pending[0], retries, interval, last)
}

// dialPort connects to 127.0.0.1:port and closes the connection at once.
func dialPort(j *job, port int) error {
	d := net.Dialer{Timeout: podDialTimeout}
	c, err := d.DialContext(j.ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return c.Close()
}

// podEnv is a step's environment in the pod, as containerEnv makes it
// for a Docker job container: the step environment the bare-metal runner
// builds, with the container's `env` for what the job and step do not
// set. A variable passed on from the agent's own environment (hostEnv,
// the image's here: PATH, HOME, …) gives way to the container's `env`, as
// an image's ENV gives way to `docker run --env`.
func (p *podContainer) podEnv(env, hostEnv []string) []string {
	out := make([]string, 0, len(env)+len(p.env))
	set := map[string]bool{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, ours := p.env[k]; ours {
			if hv, ok := lookupEnvOK(hostEnv, k); ok && hv == v {
				continue
			}
		}
		set[k] = true
		out = append(out, kv)
	}
	for k, v := range p.env {
		if !set[k] {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// lookupEnvOK is lookupEnv that tells an unset key from an empty value.
func lookupEnvOK(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}
