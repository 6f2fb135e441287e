package runner

import (
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// outputIdle is how long a step's output pipe may stay silent, after the
// step's process group is gone, before the agent stops reading it: only a
// process that escaped the group (setsid) can still hold it open.
const outputIdle = 2 * time.Second

// outputPipe carries a step's output to its log. The agent reads the pipe
// itself, rather than letting os/exec copy it, so that a slow log (the
// connection applying backpressure) only slows the reads: os/exec would
// close the pipe WaitDelay after the process exits and lose what the pipe
// still held. One pipe serves both stdout and stderr when they share a
// writer, so the log keeps the exact order in which the step wrote.
type outputPipe struct {
	r, w    *os.File
	dst     io.Writer
	done    chan struct{}
	closing atomic.Bool
	once    sync.Once
}

func newOutputPipe(dst io.Writer) (*outputPipe, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	return &outputPipe{r: r, w: w, dst: dst, done: make(chan struct{})}, nil
}

// start begins copying; call it after the child inherited the write end.
func (p *outputPipe) start() {
	p.w.Close() // the child holds its own copy
	go func() {
		defer close(p.done)
		defer p.r.Close()
		buf := make([]byte, 64<<10)
		for {
			if p.closing.Load() {
				_ = p.r.SetReadDeadline(time.Now().Add(outputIdle))
			}
			n, err := p.r.Read(buf)
			if n > 0 {
				_, _ = p.dst.Write(buf[:n])
			}
			if err != nil {
				return // EOF, or silent for outputIdle after the step ended
			}
		}
	}()
}

// abort closes both ends when the child never started.
func (p *outputPipe) abort() {
	p.w.Close()
	p.r.Close()
}

// finish waits until every byte the step wrote is in dst: it reads to EOF,
// and stops early only when a leftover holder keeps the pipe open and silent
// for outputIdle. Time spent blocked on dst does not count as silence.
func (p *outputPipe) finish() {
	p.once.Do(func() {
		p.closing.Store(true)
		_ = p.r.SetReadDeadline(time.Now().Add(outputIdle))
	})
	<-p.done
}

// stepPipes creates the pipes of one step: one shared by stdout and stderr
// when they are the same writer, otherwise one each.
func stepPipes(stdout, stderr io.Writer) (out, errp *outputPipe, err error) {
	if out, err = newOutputPipe(stdout); err != nil {
		return nil, nil, err
	}
	if stderr == stdout {
		return out, out, nil
	}
	if errp, err = newOutputPipe(stderr); err != nil {
		out.abort()
		return nil, nil, err
	}
	return out, errp, nil
}

var errNoWriter = errors.New("step output writer missing")
