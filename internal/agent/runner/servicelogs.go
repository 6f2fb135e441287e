package runner

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"kici.dev/kici/internal/agent/logstream"
)

// Service logs. What a service container printed (a database refusing a
// connection, a crash on start) is what a failing test needs next to it, so
// the job log shows it: at the job's end, after the last step and before
// artifacts and caches, every service's output in a "Service <name>"
// section; and in the setup log when a service never became healthy. The
// lines go through the job's log pipeline (secrets masked, size caps) like
// a step's.

// ServiceLogLines is how many of a service's last output lines the job log
// shows.
const ServiceLogLines = 200

// serviceLogBytes bounds what is read of one service's output.
const serviceLogBytes = 256 << 10

// serviceLogTimeout bounds the read of one service's logs.
const serviceLogTimeout = 10 * time.Second

// serviceRef names a running service container.
type serviceRef struct{ id, name, image string }

// showServiceLogs writes every service's last lines into the job log.
func (j *job) showServiceLogs() {
	c := j.ctr
	if c == nil || len(c.refs) == 0 {
		return
	}
	log := j.newStream(JobLogStep)
	defer log.Close()
	for _, s := range c.refs {
		c.serviceLogs(s, log)
	}
}

// serviceLogs writes one service's last ServiceLogLines lines (stdout and
// stderr interleaved as the Engine kept them) under a header line.
func (c *jobContainers) serviceLogs(s serviceRef, log *logstream.Stream) {
	ctx, cancel := context.WithTimeout(context.Background(), serviceLogTimeout)
	defer cancel()
	rd, err := c.cli.ContainerLogs(ctx, s.id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true,
		Tail: strconv.Itoa(ServiceLogLines)})
	if err != nil {
		log.AddLine("", fmt.Sprintf("Service %s (%s): logs unavailable: %v", s.name, s.image, err))
		return
	}
	defer rd.Close()
	var buf bytes.Buffer
	w := &capWriter{w: &buf, left: serviceLogBytes}
	_, _ = stdcopy.StdCopy(w, w, rd)
	var lines []string
	sc := bufio.NewScanner(&buf)
	sc.Buffer(make([]byte, 64<<10), serviceLogBytes)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	log.AddLine("", fmt.Sprintf("── Service %s (%s): last %d lines of its output ──", s.name, s.image, len(lines)))
	for _, l := range lines {
		log.AddLine("", s.name+" | "+l)
	}
}

// capWriter keeps the first left bytes written to it and drops the rest
// (without failing the copy).
type capWriter struct {
	w    io.Writer
	left int
}

func (c *capWriter) Write(p []byte) (int, error) {
	n := len(p)
	if c.left <= 0 {
		return n, nil
	}
	if len(p) > c.left {
		p = p[:c.left]
	}
	c.left -= len(p)
	_, err := c.w.Write(p)
	return n, err
}
