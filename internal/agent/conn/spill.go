package conn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
)

// spill is the on-disk tail of the outbox while the orchestrator cannot
// take frames: length-prefixed encoded frames, appended at the end and read
// from the front. The file is unlinked as soon as it is created, so only
// this process can reach it and it disappears with the agent; it is
// truncated whenever it has been read back completely.
type spill struct {
	f      *os.File
	wOff   int64 // end of the written frames
	rOff   int64 // start of the first unread frame
	count  int   // unread frames
	bytes  int64 // unread bytes
	header [4]byte
}

// maxSpillFrame bounds one frame read back (protocol.MaxFrameBytes).
const maxSpillFrame = 25 << 20

func openSpill(dir string) (*spill, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, ".kici-agent-outbox-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return &spill{f: f}, nil
}

func (s *spill) write(b []byte) error {
	buf := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	if _, err := s.f.WriteAt(buf, s.wOff); err != nil {
		return err
	}
	s.wOff += int64(len(buf))
	s.count++
	s.bytes += int64(len(buf))
	return nil
}

func (s *spill) read() ([]byte, error) {
	if s.count == 0 {
		return nil, errors.New("spill is empty")
	}
	if _, err := s.f.ReadAt(s.header[:], s.rOff); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(s.header[:])
	if n > maxSpillFrame {
		return nil, fmt.Errorf("spill frame of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := s.f.ReadAt(b, s.rOff+4); err != nil {
		return nil, err
	}
	s.rOff += 4 + int64(n)
	s.count--
	s.bytes -= 4 + int64(n)
	if s.count == 0 {
		s.rOff, s.wOff, s.bytes = 0, 0, 0
		_ = s.f.Truncate(0)
	}
	return b, nil
}
