package dispatch

import (
	"context"
	"io"
	"sync"

	"github.com/coder/websocket"
)

// maxPooledFrame is the largest frame buffer kept for reuse: 1 MiB holds a
// full log.chunk (a kici agent sends at most 256 KiB of lines a frame); a
// rarer, larger frame's buffer is left to the collector.
const maxPooledFrame = 1 << 20

// frameBufs holds the buffers agents' frames are read into, shared by all
// connections. Reading every frame into a new slice (websocket.Conn.Read,
// which grows it from 512 bytes) made a step's output cost the
// orchestrator about twice its size again in garbage, and the collector's
// work for it was a large share of the message loop's core. A sync.Pool,
// not a buffer per connection, so that a thousand idle agents hold no
// buffers: the collector empties the pool of what sits unused.
var frameBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// readFrame reads the next data message of ws into a pooled buffer. The
// caller hands it back with releaseFrame once decoded.
func readFrame(ctx context.Context, ws *websocket.Conn) ([]byte, error) {
	_, r, err := ws.Reader(ctx)
	if err != nil {
		return nil, err
	}
	bp := frameBufs.Get().(*[]byte)
	return readAllInto((*bp)[:0], r)
}

// releaseFrame hands a decoded frame's buffer back to the pool; nothing may
// use the frame after. protocol.Decode copies every string and raw message
// out of a frame, so a decoded message does not refer to it. Buffers over
// maxPooledFrame are dropped.
func releaseFrame(frame []byte) {
	if cap(frame) == 0 || cap(frame) > maxPooledFrame {
		return
	}
	frame = frame[:0]
	frameBufs.Put(&frame)
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
