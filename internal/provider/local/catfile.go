package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// catFileIdle is how long an unused `git cat-file --batch` process is kept
// before it is stopped (the next read starts a new one).
const catFileIdle = 15 * time.Second

// errObjectMissing is what cat-file answers for a name it cannot resolve.
var errObjectMissing = errors.New("object missing")

// catFile is one long-lived `git cat-file --batch` process reading objects
// of a repository: a lock read costs two request lines on its pipes instead
// of forking git per question (existence, type, content). It is used by
// one caller at a time (Repo.mu) and is stopped after catFileIdle without
// use or after any protocol or I/O error, so a wedged process never
// outlives the read that found it wedged.
type catFile struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	idle *time.Timer
}

func (r *Repo) startCatFile() (*catFile, error) {
	cmd := exec.Command("git", "-C", r.path, "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "cat-file", "--batch")
	cmd.Env = gitEnv()
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("git cat-file --batch: %w", err)
	}
	return &catFile{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 64<<10)}, nil
}

// stop ends the process (closing stdin makes cat-file exit; the kill is for
// a process that does not) and reaps it.
func (c *catFile) stop() {
	if c.idle != nil {
		c.idle.Stop()
	}
	_ = c.in.Close()
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}

// Close stops the repository's object reader, if one is running. A Repo
// stays usable after Close (the next read starts a new reader).
func (r *Repo) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cat != nil {
		r.cat.stop()
		r.cat = nil
	}
}

// object reads one object by revision expression (e.g. "<sha>^{commit}",
// "<sha>:<path>") and returns its type and, when withData, its content.
// An object larger than limit is skipped on the pipe and reported as an
// error. errObjectMissing when git cannot resolve the name.
func (r *Repo) object(ctx context.Context, rev string, limit int64, withData bool) (string, []byte, error) {
	if strings.ContainsAny(rev, "\n\r\x00") {
		return "", nil, fmt.Errorf("%w: %q", ErrInvalidRef, rev)
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = time.Until(dl)
	}
	if err := ctx.Err(); err != nil {
		return "", nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cat == nil {
		c, err := r.startCatFile()
		if err != nil {
			return "", nil, err
		}
		r.cat = c
	}
	c := r.cat
	c.idle = resetTimer(c.idle, catFileIdle, func() { r.stopIdle(c) })
	// A read that takes longer than the deadline kills the process, which
	// unblocks the read with an error.
	watchdog := time.AfterFunc(timeout, func() { _ = c.cmd.Process.Kill() })
	typ, data, err := c.read(rev, limit, withData)
	watchdog.Stop()
	if err != nil && !errors.Is(err, errObjectMissing) && !errors.Is(err, errObjectTooLarge) {
		c.stop()
		r.cat = nil
		if ctx.Err() != nil {
			return "", nil, ctx.Err()
		}
		return "", nil, fmt.Errorf("git cat-file --batch %s: %w", rev, err)
	}
	return typ, data, err
}

// stopIdle stops c if it is still the repository's reader.
func (r *Repo) stopIdle(c *catFile) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cat == c {
		c.stop()
		r.cat = nil
	}
}

func resetTimer(t *time.Timer, d time.Duration, f func()) *time.Timer {
	if t == nil {
		return time.AfterFunc(d, f)
	}
	t.Reset(d)
	return t
}

// errObjectTooLarge reports an object over the caller's limit (its bytes
// were skipped, so the reader stays in step).
var errObjectTooLarge = errors.New("object larger than the limit")

// read speaks one request of the --batch protocol: "<rev>\n" answered by
// "<oid> <type> <size>\n<content>\n" or "<rev> missing\n" (also
// "ambiguous").
func (c *catFile) read(rev string, limit int64, withData bool) (string, []byte, error) {
	if _, err := io.WriteString(c.in, rev+"\n"); err != nil {
		return "", nil, err
	}
	header, err := c.out.ReadString('\n')
	if err != nil {
		return "", nil, err
	}
	fields := strings.Fields(header)
	if len(fields) == 2 && (fields[1] == "missing" || fields[1] == "ambiguous") {
		return "", nil, errObjectMissing
	}
	if len(fields) != 3 {
		return "", nil, fmt.Errorf("unexpected header %q", strings.TrimSpace(header))
	}
	size, err := strconv.ParseInt(fields[2], 10, 64)
	if err != nil || size < 0 {
		return "", nil, fmt.Errorf("unexpected header %q", strings.TrimSpace(header))
	}
	if tooLarge := withData && size > limit; !withData || tooLarge {
		if _, err := io.CopyN(io.Discard, c.out, size+1); err != nil {
			return "", nil, err
		}
		if tooLarge {
			return fields[1], nil, fmt.Errorf("%w (%d > %d bytes)", errObjectTooLarge, size, limit)
		}
		return fields[1], nil, nil
	}
	data := make([]byte, size+1)
	if _, err := io.ReadFull(c.out, data); err != nil {
		return "", nil, err
	}
	if data[size] != '\n' {
		return "", nil, errors.New("object not followed by a newline")
	}
	return fields[1], data[:size], nil
}
