package dispatch

import (
	"context"
	"io"

	"github.com/coder/websocket"
)

// maxKeptFrameBuffer is the largest frame buffer a connection keeps for
// reuse: 1 MiB holds a full log.chunk (the agent sends at most a few
// hundred KiB of lines per frame); a rarer, larger frame's buffer is left
// to the collector so that an idle connection does not hold up to
// protocol.MaxFrameBytes.
const maxKeptFrameBuffer = 1 << 20

// frameBuffers recycles the buffers one connection's frames are read into.
// Reading every frame into a new slice (websocket.Conn.Read, which grows
// it from 512 bytes) made a step printing a million lines allocate about
// twice its output again in the orchestrator, and the collector's work
// for that garbage was a large share of the message loop's core. The
// reader takes a buffer, the loop hands it back once the frame is
// decoded: protocol.Decode copies every string and raw message out of the
// frame, so nothing refers to the buffer after it.
type frameBuffers struct{ free chan []byte }

// newFrameBuffers keeps up to two buffers: the one being read into and the
// one being decoded.
func newFrameBuffers() *frameBuffers { return &frameBuffers{free: make(chan []byte, 2)} }

// read reads the next data message of ws into a recycled buffer.
func (f *frameBuffers) read(ctx context.Context, ws *websocket.Conn) ([]byte, error) {
	_, r, err := ws.Reader(ctx)
	if err != nil {
		return nil, err
	}
	var buf []byte
	select {
	case buf = <-f.free:
	default:
		buf = make([]byte, 0, 4<<10)
	}
	return readAllInto(buf[:0], r)
}

// put hands a decoded frame's buffer back; the frame must not be used
// after. Buffers over maxKeptFrameBuffer, and any beyond the two kept, are
// dropped.
func (f *frameBuffers) put(frame []byte) {
	if cap(frame) > maxKeptFrameBuffer {
		return
	}
	select {
	case f.free <- frame[:0]:
	default:
	}
}

// readAllInto appends everything r yields to b, as io.ReadAll does for a
// new slice.
func readAllInto(b []byte, r io.Reader) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // let append pick the next capacity
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}
