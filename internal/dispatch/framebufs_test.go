package dispatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/coder/websocket"

	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runs/status"
)

// A frame's buffer is reused once the frame is decoded, so a decoded
// message must not point into it: overwriting the frame after Decode leaves
// every line, id, map key and value of the messages agents send as sent.
func TestDecodedFramesOutliveTheirBuffer(t *testing.T) {
	off := int64(7)
	sent := []any{
		&protocol.LogChunk{Type: protocol.TypeLogChunk, RunID: "run-1", JobID: "job-1", Offset: &off,
			Lines: []protocol.LogLine{{Timestamp: 1, Stream: protocol.StreamStdout, Text: "first line"}, {Timestamp: 2, Text: `with "escapes" é`}}},
		&protocol.JobStatus{Type: protocol.TypeJobStatus, MessageID: "m-1", RunID: "run-1", JobID: "job-1", State: status.JobSuccess,
			Data: &protocol.JobStatusData{Error: "none", Outputs: map[string]string{"version": "1.2.3", "sha": "abc"}}},
		&protocol.ProvenanceAttest{Type: protocol.TypeProvenanceAttest, RequestID: "q-1", RunID: "run-1", JobID: "job-1",
			Subjects: []protocol.AttestSubject{{Name: "app.tar", Digest: map[string]string{"sha256": strings.Repeat("ab", 32)}}}},
	}
	for _, m := range sent {
		frame, err := json.Marshal(m)
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
		want, _ := json.Marshal(m)
		if !bytes.Equal(got, want) {
			t.Errorf("after its frame was overwritten the message reads\n%s\nwant\n%s", got, want)
		}
	}
}

// Frames read over a real socket into pooled buffers, each handed back
// after use, arrive whole and in order, small and large ones mixed (a
// large one's buffer is not pooled).
func TestFramesReadIntoPooledBuffers(t *testing.T) {
	var frames []string
	for i := range 50 {
		frames = append(frames, fmt.Sprintf("frame %d ", i)+strings.Repeat("y", (i%5)*(maxPooledFrame/3)))
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		for _, f := range frames {
			if err := ws.Write(r.Context(), websocket.MessageText, []byte(f)); err != nil {
				return
			}
		}
		_, _, _ = ws.Read(r.Context()) // until the reader is done
	}))
	defer srv.Close()
	ws, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(4 * maxPooledFrame)
	for i, want := range frames {
		got, err := readFrame(t.Context(), ws)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if string(got) != want {
			t.Fatalf("frame %d: %d bytes starting %q, want %d starting %q", i, len(got), got[:min(12, len(got))], len(want), want[:12])
		}
		releaseFrame(got)
	}
}

// readAllInto appends whatever the reader yields, in pieces, into the
// buffer it is given while it has room, and returns the reader's error.
func TestReadAllIntoFillsTheBufferItIsGiven(t *testing.T) {
	text := strings.Repeat("0123456789", 100)
	got, err := readAllInto(make([]byte, 0, 8), iotest.OneByteReader(strings.NewReader(text)))
	if err != nil || string(got) != text {
		t.Fatalf("read %q, %v", got, err)
	}
	if _, err := readAllInto(nil, iotest.ErrReader(iotest.ErrTimeout)); err != iotest.ErrTimeout {
		t.Errorf("a failing reader gave %v", err)
	}
	buf := make([]byte, 0, 64)
	if again, _ := readAllInto(buf, strings.NewReader("abc")); &again[0] != &buf[:1][0] {
		t.Error("a buffer with room was not read into")
	}
}
