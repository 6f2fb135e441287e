package logstore

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"kici.dev/kici/internal/protocol"
)

// logFile is the open state of one step's log: the log and its index, the
// number of indexed lines and the byte size they cover, and the agent offset
// held (hwm). Guarded by mu.
type logFile struct {
	mu     sync.Mutex
	data   *os.File
	idx    *os.File
	lines  int64
	size   int64
	hwm    int64 // agent lines stored; -1 until computed
	capped int8  // the size cap's marker is stored: 1 yes, 0 no, -1 unknown
	closed bool
	buf    []byte // encoding scratch
	ibuf   []byte // index scratch
}

// openLogFile opens (create: creating) a log and its index and reconciles
// them: index entries past the log's end are dropped, complete lines the
// index lacks are indexed, and a torn last line (a write cut by a crash) is
// cut off, since its sender never saw it acknowledged.
func openLogFile(path string, create bool) (*logFile, error) {
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return nil, err
		}
	}
	data, err := os.OpenFile(path, flags, 0o640)
	if errors.Is(err, os.ErrNotExist) && !create {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	idx, err := os.OpenFile(strings.TrimSuffix(path, ".log")+".idx", os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		data.Close()
		return nil, err
	}
	lf := &logFile{data: data, idx: idx, hwm: -1, capped: -1}
	if err := lf.reconcile(); err != nil {
		lf.close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return lf, nil
}

func (lf *logFile) close() {
	lf.closed = true
	lf.data.Close()
	lf.idx.Close()
}

func (lf *logFile) reconcile() error {
	dst, err := lf.data.Stat()
	if err != nil {
		return err
	}
	ist, err := lf.idx.Stat()
	if err != nil {
		return err
	}
	n := ist.Size() / 8
	var end int64
	for n > 0 {
		if end, err = lf.entry(n - 1); err != nil {
			return err
		}
		if end <= dst.Size() {
			break
		}
		n-- // indexes a line the log lost
	}
	if n*8 != ist.Size() {
		if err := lf.idx.Truncate(n * 8); err != nil {
			return err
		}
	}
	lf.lines, lf.size = n, end
	if end == dst.Size() {
		return nil
	}
	// Index the complete lines after the indexed part.
	r := bufio.NewReaderSize(io.NewSectionReader(lf.data, end, dst.Size()-end), 64<<10)
	var add []byte
	pos := end
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			for err == bufio.ErrBufferFull {
				pos += int64(len(line))
				line, err = r.ReadSlice('\n')
			}
		}
		if err != nil {
			break // EOF: what is left has no newline
		}
		pos += int64(len(line))
		add = binary.LittleEndian.AppendUint64(add, uint64(pos))
		lf.lines++
	}
	if len(add) > 0 {
		if _, err := lf.idx.WriteAt(add, n*8); err != nil {
			return err
		}
	}
	if len(add) > 0 {
		lf.size = int64(binary.LittleEndian.Uint64(add[len(add)-8:]))
	}
	if lf.size < dst.Size() {
		return lf.data.Truncate(lf.size)
	}
	return nil
}

// entry returns where line i ends.
func (lf *logFile) entry(i int64) (int64, error) {
	var b [8]byte
	if _, err := lf.idx.ReadAt(b[:], i*8); err != nil {
		return 0, err
	}
	return int64(binary.LittleEndian.Uint64(b[:])), nil
}

// start returns where line i begins.
func (lf *logFile) start(i int64) (int64, error) {
	if i == 0 {
		return 0, nil
	}
	return lf.entry(i - 1)
}

// agentOffset finds the agent offset held: the tag of the last tagged line
// plus one (0 when no line is tagged). Lines after it are untagged lines of
// other writers. Since every agent line is tagged (logs written before that
// tagged only the last line of a batch, which reads the same), the answer
// is exact even after a write cut in the middle of a batch.
func (lf *logFile) agentOffset() (int64, error) {
	for i := lf.lines - 1; i >= 0; i-- {
		from, err := lf.start(i)
		if err != nil {
			return 0, err
		}
		to, err := lf.entry(i)
		if err != nil {
			return 0, err
		}
		line := make([]byte, to-from)
		if _, err := lf.data.ReadAt(line, from); err != nil {
			return 0, err
		}
		var tag struct {
			Src *int64 `json:"src"`
		}
		if bytes.Contains(line, []byte(`"src":`)) && json.Unmarshal(line, &tag) == nil && tag.Src != nil {
			return *tag.Src + 1, nil
		}
	}
	return 0, nil
}

// lastIsCapMarker reports whether the log's last line is the size cap's
// marker (only agent lines are cut, and other writers' lines after the
// marker are rare, so the last line tells after a restart).
func (lf *logFile) lastIsCapMarker() (bool, error) {
	if lf.lines == 0 {
		return false, nil
	}
	raw, err := lf.page(lf.lines-1, 1)
	if err != nil {
		return false, err
	}
	if !bytes.Contains(raw, []byte(CapMarkerPrefix)) {
		return false, nil
	}
	ls, err := decodeLines(raw)
	return err == nil && len(ls) == 1 && isCapMarker(&ls[0]), nil
}

// append writes lines (offset < 0: untagged) and returns the result and the
// text bytes written. Agent lines (offset >= 0) past maxBytes (> 0) are
// dropped and acknowledged, the first time after the cap's marker line.
// Caller holds mu.
func (lf *logFile) append(offset int64, lines []protocol.LogLine, maxBytes int64) (AppendResult, int64, error) {
	var res AppendResult
	if offset >= 0 {
		if lf.hwm < 0 {
			h, err := lf.agentOffset()
			if err != nil {
				return res, 0, err
			}
			lf.hwm = h
		}
		if skip := lf.hwm - offset; skip > 0 {
			skip = min(skip, int64(len(lines)))
			res.Duplicate = int(skip)
			lines = lines[skip:]
			offset += skip
		}
		if offset > lf.hwm {
			res.Missing = offset - lf.hwm
		}
		res.Acked = lf.hwm
	}
	agentEnd := offset + int64(len(lines))
	var marker bool
	if offset >= 0 && maxBytes > 0 && len(lines) > 0 {
		if lf.capped < 0 {
			c, err := lf.lastIsCapMarker()
			if err != nil {
				return res, 0, err
			}
			lf.capped = 0
			if c {
				lf.capped = 1
			}
		}
		lines, res.Capped, marker = applyCap(maxBytes, lf.size, lf.capped == 1, lines)
		if res.Capped > 0 && len(lines) == 0 && !marker {
			lf.hwm, res.Acked = agentEnd, agentEnd
			return res, 0, nil
		}
	}
	if len(lines) == 0 && !marker {
		return res, 0, nil
	}
	buf, ibuf := lf.buf[:0], lf.ibuf[:0]
	var text int64
	pos := lf.size
	for i := range lines {
		// Every agent line carries its own offset, not only the last of a
		// batch: a write cut short by a kill -9 leaves a prefix of the
		// batch, and after the restart agentOffset must count exactly that
		// prefix, or the agent's replay of the batch stores it twice.
		tag := int64(-1)
		if offset >= 0 {
			tag = offset + int64(i)
		}
		buf = appendLine(buf, &lines[i], tag)
		text += int64(len(lines[i].Text))
		ibuf = binary.LittleEndian.AppendUint64(ibuf, uint64(pos+int64(len(buf))))
	}
	stored := len(lines)
	if marker {
		m := capMarker(maxBytes)
		buf = appendLine(buf, &m, -1)
		ibuf = binary.LittleEndian.AppendUint64(ibuf, uint64(pos+int64(len(buf))))
		stored++
	}
	lf.buf, lf.ibuf = buf, ibuf
	if _, err := lf.data.WriteAt(buf, lf.size); err != nil {
		return res, 0, fmt.Errorf("logstore: append: %w", err)
	}
	if _, err := lf.idx.WriteAt(ibuf, lf.lines*8); err != nil {
		return res, 0, fmt.Errorf("logstore: append index: %w", err)
	}
	lf.size += int64(len(buf))
	lf.lines += int64(stored)
	res.Stored = stored
	if marker {
		lf.capped = 1
	}
	if offset >= 0 {
		lf.hwm = agentEnd
		res.Acked = lf.hwm
	}
	if cap(lf.buf) > 4<<20 { // do not keep a huge scratch per open file
		lf.buf, lf.ibuf = nil, nil
	}
	return res, text, nil
}

// page returns the raw bytes of up to limit lines from line cursor. Caller
// holds mu.
func (lf *logFile) page(cursor int64, limit int) ([]byte, error) {
	if cursor >= lf.lines {
		return nil, nil
	}
	last := min(cursor+int64(limit), lf.lines) - 1
	from, err := lf.start(cursor)
	if err != nil {
		return nil, err
	}
	to, err := lf.entry(last)
	if err != nil {
		return nil, err
	}
	b := make([]byte, to-from)
	_, err = lf.data.ReadAt(b, from)
	return b, err
}

// appendLine encodes one line as JSON the way encoding/json would (without
// HTML escaping), with a "src" tag when tag >= 0, and a newline.
func appendLine(b []byte, l *protocol.LogLine, tag int64) []byte {
	b = append(b, `{"ts":`...)
	b = strconv.AppendInt(b, l.Timestamp, 10)
	if l.Stream != "" {
		b = append(b, `,"stream":`...)
		b = appendJSONString(b, string(l.Stream))
	}
	b = append(b, `,"msg":`...)
	b = appendJSONString(b, l.Text)
	if tag >= 0 {
		b = append(b, `,"src":`...)
		b = strconv.AppendInt(b, tag, 10)
	}
	return append(b, '}', '\n')
}

// appendJSONString quotes s; plain text is copied as is, anything else goes
// through encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			var sb bytes.Buffer
			enc := json.NewEncoder(&sb)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(s)
			return append(b, bytes.TrimSuffix(sb.Bytes(), []byte{'\n'})...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// decodeLines parses newline-terminated JSON lines; on error it returns the
// lines before the bad one.
func decodeLines(raw []byte) ([]protocol.LogLine, error) {
	out := make([]protocol.LogLine, 0, bytes.Count(raw, []byte{'\n'}))
	for len(raw) > 0 {
		i := bytes.IndexByte(raw, '\n')
		if i < 0 {
			i = len(raw)
		}
		var l protocol.LogLine
		if err := json.Unmarshal(raw[:i], &l); err != nil {
			return out, err
		}
		out = append(out, l)
		raw = raw[min(i+1, len(raw)):]
	}
	return out, nil
}
