package logstream

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"kici.dev/kici/internal/protocol"
)

// Defaults for Options fields left zero.
const (
	// DefaultFlushLines flushes a batch once it holds this many lines.
	DefaultFlushLines = 50
	// DefaultFlushInterval flushes a non-empty batch at most this long after
	// its first line was added.
	DefaultFlushInterval = 100 * time.Millisecond
	// MaxLineBytes splits longer lines into several LogLines of at most this
	// many bytes (on a UTF-8 boundary).
	MaxLineBytes = 64 << 10
)

// Stream names used in protocol.LogLine.Stream.
const (
	Stdout = protocol.StreamStdout
	Stderr = protocol.StreamStderr
)

// Options configures a Stream.
type Options struct {
	// MaxBytes caps the bytes of line text forwarded for this step; once the
	// next line would exceed it, one TruncatedLine marker is emitted and the
	// rest is dropped. 0 means no cap.
	MaxBytes int64
	// Masker masks secrets in every line (nil = none).
	Masker *Masker
	// Flush receives each batch in order. It is called with the stream's lock
	// held, so it must not block for long or call back into the Stream.
	Flush func(lines []protocol.LogLine)
	// FlushLines and FlushInterval override DefaultFlushLines and
	// DefaultFlushInterval.
	FlushLines int
	// FlushInterval: see FlushLines.
	FlushInterval time.Duration
	// Now overrides time.Now (tests).
	Now func() time.Time
}

// TruncatedLine is the marker written once when a step's log exceeds its cap.
func TruncatedLine(maxBytes int64) string {
	return fmt.Sprintf("[TRUNCATED: log output exceeded %d bytes]", maxBytes)
}

// Stream batches the log lines of one step (or the job-level bucket). Lines
// keep the order in which they were added; Writer gives line-splitting
// io.Writers for a process's stdout and stderr. All methods are safe for
// concurrent use.
type Stream struct {
	opts Options

	mu        sync.Mutex
	pending   []protocol.LogLine
	timer     *time.Timer
	streamed  int64
	truncated bool
	closed    bool
	writers   []*lineWriter
}

// New returns a Stream; opts.Flush must be set.
func New(opts Options) *Stream {
	if opts.FlushLines <= 0 {
		opts.FlushLines = DefaultFlushLines
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = DefaultFlushInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Stream{opts: opts}
}

// AddLine adds one line (without its newline) from stream (Stdout/Stderr or
// "" for agent-generated lines). Invalid UTF-8 is replaced with U+FFFD, lines
// longer than MaxLineBytes are split, secrets are masked.
func (s *Stream) AddLine(stream protocol.LogStream, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addLocked(stream, s.opts.Masker.Mask(text))
}

// addLocked adds one already masked line: masking happens before the line
// is cut at MaxLineBytes, so no secret can straddle the cut.
func (s *Stream) addLocked(stream protocol.LogStream, text string) {
	if s.closed {
		return
	}
	text = strings.ToValidUTF8(text, "\uFFFD")
	text = strings.TrimSuffix(text, "\r")
	for {
		part := text
		if len(part) > MaxLineBytes {
			cut := MaxLineBytes
			for cut > 0 && !utf8.RuneStart(text[cut]) {
				cut--
			}
			if cut == 0 {
				cut = MaxLineBytes
			}
			part, text = text[:cut], text[cut:]
		} else {
			text = ""
		}
		s.addOneLocked(stream, part)
		if text == "" {
			return
		}
	}
}

func (s *Stream) addOneLocked(stream protocol.LogStream, text string) {
	if s.truncated {
		return
	}
	if s.opts.MaxBytes > 0 && s.streamed+int64(len(text)) > s.opts.MaxBytes {
		s.truncated = true
		text = TruncatedLine(s.opts.MaxBytes)
		stream = ""
	} else {
		s.streamed += int64(len(text))
	}
	s.pending = append(s.pending, protocol.LogLine{
		Timestamp: s.opts.Now().UnixMilli(),
		Stream:    stream,
		Text:      text,
	})
	if len(s.pending) >= s.opts.FlushLines {
		s.flushLocked()
		return
	}
	if s.timer == nil {
		s.timer = time.AfterFunc(s.opts.FlushInterval, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.timer = nil
			s.flushLocked()
		})
	}
}

func (s *Stream) flushLocked() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if len(s.pending) == 0 {
		return
	}
	lines := s.pending
	s.pending = nil
	s.opts.Flush(lines)
}

// Flush sends the pending batch now, if any.
func (s *Stream) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked()
}

// Close emits the unterminated tail of every Writer as a last line, flushes,
// and ignores later input. It is idempotent.
func (s *Stream) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	for _, w := range s.writers {
		if len(w.hold) > 0 {
			out, _ := s.opts.Masker.redact(nil, w.hold, true)
			w.hold = nil
			w.lines(out)
		}
		if len(w.buf) > 0 {
			s.addLocked(w.stream, string(w.buf))
			w.buf = nil
		}
	}
	s.flushLocked()
	s.closed = true
}

// BytesStreamed is the number of line-text bytes accepted so far (after
// masking, excluding the truncation marker and newlines).
func (s *Stream) BytesStreamed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streamed
}

// Truncated reports whether the cap was hit.
func (s *Stream) Truncated() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.truncated
}

// Writer returns an io.Writer that splits its input into lines attributed to
// stream. Secrets are masked on the byte stream before lines are cut, and a
// possible secret prefix at the end of a write is held back until the next
// write (or Close) decides it. A partial last line is held until more input
// or Close.
func (s *Stream) Writer(stream protocol.LogStream) io.Writer {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &lineWriter{s: s, stream: stream}
	s.writers = append(s.writers, w)
	return w
}

type lineWriter struct {
	s      *Stream
	stream protocol.LogStream
	hold   []byte // unmasked bytes that may begin a secret
	out    []byte // scratch for the masked bytes of one write
	buf    []byte // the current partial line (masked)
}

// Write implements io.Writer; it never fails. It blocks while the Flush
// callback blocks (backpressure from the connection).
func (w *lineWriter) Write(p []byte) (int, error) {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	if m := s.opts.Masker; !m.Empty() {
		w.hold = append(w.hold, p...)
		var used int
		w.out, used = m.redact(w.out[:0], w.hold, false)
		w.hold = w.hold[:copy(w.hold, w.hold[used:])]
		p = w.out
	}
	w.lines(p)
	return n, nil
}

// lines splits masked bytes into lines. Caller holds s.mu.
func (w *lineWriter) lines(p []byte) {
	s := w.s
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.buf = append(w.buf, p...)
			// Bound memory on endless lines: emit full-size pieces early.
			for len(w.buf) > MaxLineBytes {
				cut := MaxLineBytes
				for cut > 0 && !utf8.RuneStart(w.buf[cut]) {
					cut--
				}
				if cut == 0 {
					cut = MaxLineBytes
				}
				s.addLocked(w.stream, string(w.buf[:cut]))
				w.buf = append(w.buf[:0:0], w.buf[cut:]...)
			}
			return
		}
		line := p[:i]
		if len(w.buf) > 0 {
			line = append(w.buf, line...)
			w.buf = w.buf[:0]
		}
		s.addLocked(w.stream, string(line))
		p = p[i+1:]
	}
}
