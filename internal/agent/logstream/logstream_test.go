package logstream

import (
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/testutil/wait"
)

func TestMasker(t *testing.T) {
	m := NewMasker([]string{"abc", "abcdef", "xy", ""})
	cases := map[string]string{
		"token abcdef here": "token *** here",
		"abc and abcde":     "*** and ***de",
		"xy stays":          "xy stays",
		"b64 " + base64.StdEncoding.EncodeToString([]byte("abcdef")): "b64 ***",
		"nothing": "nothing",
	}
	for in, want := range cases {
		if got := m.Mask(in); got != want {
			t.Errorf("Mask(%q) = %q, want %q", in, got, want)
		}
	}
	var nilM *Masker
	if nilM.Mask("abc") != "abc" || NewMasker(nil).Mask("abc") != "abc" {
		t.Error("empty masker changed text")
	}
}

type sink struct {
	mu      sync.Mutex
	batches [][]protocol.LogLine
}

func (s *sink) flush(l []protocol.LogLine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, l)
}

func (s *sink) get() [][]protocol.LogLine {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]protocol.LogLine(nil), s.batches...)
}

func (s *sink) lines() []protocol.LogLine {
	var out []protocol.LogLine
	for _, b := range s.get() {
		out = append(out, b...)
	}
	return out
}

func TestBatchingBySizeAndTime(t *testing.T) {
	var sk sink
	s := New(Options{Flush: sk.flush, FlushInterval: 50 * time.Millisecond})
	w := s.Writer(Stdout)
	for i := 0; i < 120; i++ {
		fmt.Fprintf(w, "line %d\n", i)
	}
	b := sk.get()
	if len(b) != 2 || len(b[0]) != 50 || len(b[1]) != 50 {
		t.Fatalf("after 120 lines: %d batches", len(b))
	}
	wait.Until(5*time.Second, func() bool { return len(sk.get()) >= 3 })
	b = sk.get()
	if len(b) != 3 || len(b[2]) != 20 {
		t.Fatalf("timed flush missing: %d batches", len(b))
	}
	s.Close()
	for i, l := range sk.lines() {
		if l.Text != fmt.Sprintf("line %d", i) || l.Stream != Stdout {
			t.Fatalf("line %d = %+v", i, l)
		}
	}
}

func TestPartialLinesStreamsAndClose(t *testing.T) {
	var sk sink
	s := New(Options{Flush: sk.flush})
	out, errw := s.Writer(Stdout), s.Writer(Stderr)
	if _, err := io.WriteString(out, "hel"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(errw, "oops\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(out, "lo\r\nwor"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := io.WriteString(out, "ignored\n"); err != nil {
		t.Fatal(err)
	}
	got := sk.lines()
	want := []protocol.LogLine{{Stream: Stderr, Text: "oops"}, {Stream: Stdout, Text: "hello"}, {Stream: Stdout, Text: "wor"}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i].Stream != want[i].Stream || got[i].Text != want[i].Text {
			t.Errorf("line %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestTruncation(t *testing.T) {
	var sk sink
	s := New(Options{Flush: sk.flush, MaxBytes: 25})
	for i := 0; i < 10; i++ {
		s.AddLine(Stdout, "0123456789") // 10 bytes
	}
	s.Close()
	got := sk.lines()
	if len(got) != 3 || got[2].Text != "[TRUNCATED: log output exceeded 25 bytes]" {
		t.Fatalf("got %+v", got)
	}
	if s.BytesStreamed() != 20 || !s.Truncated() {
		t.Errorf("streamed %d truncated %v", s.BytesStreamed(), s.Truncated())
	}
}

func TestLongLinesInvalidUTF8AndMasking(t *testing.T) {
	var sk sink
	s := New(Options{Flush: sk.flush, Masker: NewMasker([]string{"hunter2"})})
	w := s.Writer(Stdout)
	long := strings.Repeat("é", MaxLineBytes) // 2 bytes each → 2×MaxLineBytes bytes
	if _, err := io.WriteString(w, long+"\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(w, "bad \xff\xfe byte, password hunter2\n"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	got := sk.lines()
	if len(got) != 3 {
		t.Fatalf("%d lines", len(got))
	}
	total := ""
	for _, l := range got[:2] {
		if len(l.Text) > MaxLineBytes || !utf8.ValidString(l.Text) {
			t.Errorf("piece of %d bytes, valid=%v", len(l.Text), utf8.ValidString(l.Text))
		}
		total += l.Text
	}
	if total != long {
		t.Error("split pieces do not reassemble the line")
	}
	if got[2].Text != "bad \uFFFD byte, password ***" {
		t.Errorf("line = %q", got[2].Text)
	}
}
