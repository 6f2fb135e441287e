package dispatch

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"testing/iotest"

	"kici.dev/kici/internal/protocol"
)

// A frame's buffer is reused once the frame is decoded, so a decoded
// message must not point into it: overwriting the frame after Decode leaves
// every line, id and raw job config as sent.
func TestDecodedFramesOutliveTheirBuffer(t *testing.T) {
	off := int64(7)
	chunk := &protocol.LogChunk{Type: protocol.TypeLogChunk, RunID: "run-1", JobID: "job-1", Offset: &off,
		Lines: []protocol.LogLine{{Timestamp: 1, Stream: protocol.StreamStdout, Text: "first line"}, {Timestamp: 2, Text: `with "escapes" é`}}}
	dispatch := &protocol.JobDispatch{Type: protocol.TypeJobDispatch, RunID: "run-1", JobID: "job-2", JobConfig: json.RawMessage(`{"steps":[{"run":"make"}]}`)}
	for _, sent := range []any{chunk, dispatch} {
		frame, err := json.Marshal(sent)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := protocol.Decode(frame)
		if err != nil {
			t.Fatal(err)
		}
		for i := range frame {
			frame[i] = 'x'
		}
		got, _ := json.Marshal(msg)
		want, _ := json.Marshal(sent)
		if !bytes.Equal(got, want) {
			t.Errorf("after its frame was overwritten the message reads\n%s\nwant\n%s", got, want)
		}
	}
}

// A returned buffer is read into again; one larger than maxKeptFrameBuffer
// is not kept, and reading appends whatever the reader yields, in pieces.
func TestFrameBuffersAreReused(t *testing.T) {
	f := newFrameBuffers()
	small := make([]byte, 10, 64)
	f.put(small)
	f.put(make([]byte, 0, maxKeptFrameBuffer+1))
	if len(f.free) != 1 {
		t.Fatalf("%d buffers kept, want only the small one", len(f.free))
	}
	buf := <-f.free
	text := strings.Repeat("0123456789", 100)
	got, err := readAllInto(buf, iotest.OneByteReader(strings.NewReader(text)))
	if err != nil || string(got) != text {
		t.Fatalf("read %q, %v", got, err)
	}
	if _, err := readAllInto(nil, iotest.ErrReader(iotest.ErrTimeout)); err != iotest.ErrTimeout {
		t.Errorf("a failing reader gave %v", err)
	}
	if again, _ := readAllInto(small[:0], strings.NewReader("abc")); &again[0] != &small[:1][0] {
		t.Error("a buffer with room was not read into")
	}
}
