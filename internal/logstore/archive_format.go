package logstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/klauspost/compress/zstd"

	"kici.dev/kici/internal/blobstore"
	"kici.dev/kici/internal/protocol"
)

// An archived step log is two blob-store objects under
// steplogs/<runId>/<jobId>/: <name>.chunks, the log's JSON Lines cut into
// chunks of at most archiveChunkLines lines (or archiveChunkBytes bytes),
// each compressed as an independent zstd frame with its checksum, and
// <name>.index.json, the index: each chunk's first line number and byte
// offset in the data object. A page is read with one ranged read of the
// chunks that overlap it.
const (
	archiveChunkLines = 2048
	archiveChunkBytes = 512 << 10
	archiveVersion    = 1
)

// archiveIndex is the index object of an archived step log.
type archiveIndex struct {
	Version int    `json:"v"`
	RunID   string `json:"run"`
	JobID   string `json:"job"`
	Step    int    `json:"step"`
	// Lines is the number of lines archived; AgentOffset the agent offset
	// held when the log was archived (replays below it are duplicates).
	Lines       int64 `json:"lines"`
	AgentOffset int64 `json:"agentOffset"`
	// Bytes is the uncompressed JSON Lines size, DataSize the compressed
	// data object's size and DataSHA256 its digest.
	Bytes      int64  `json:"bytes"`
	DataSize   int64  `json:"dataSize"`
	DataSHA256 string `json:"dataSha256"`
	// First[i] is chunk i's first line number, Offset[i] its byte offset.
	First  []int64 `json:"first"`
	Offset []int64 `json:"offset"`
}

// archiveMarker records, next to the live log (a marker file, a column of
// the head row), that a step's log is archived: the index object's digest,
// so a reader only trusts an index that was completely written.
type archiveMarker struct {
	Lines       int64  `json:"lines"`
	AgentOffset int64  `json:"agentOffset"`
	IndexSHA256 string `json:"indexSha256"`
	// Bytes is the archived log's uncompressed size.
	Bytes int64 `json:"bytes"`
}

// archiveKeys returns the data and index keys of a step's archive.
func archiveKeys(runID, jobID string, step int) (data, index string) {
	name := "job"
	if step != JobStepIndex {
		name = "step-" + strconv.Itoa(step)
	}
	base := "steplogs/" + runID + "/" + jobID + "/" + name
	return base + ".chunks", base + ".index.json"
}

var (
	zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderCRC(true))
	zdec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0))
)

// chunkWriter compresses lines into chunks written to w, building the index.
type chunkWriter struct {
	w     io.Writer
	idx   *archiveIndex
	buf   []byte // the current chunk's JSON Lines
	n     int    // lines in buf
	line  int64  // number of the next line
	off   int64  // bytes written to w
	frame []byte
}

func (c *chunkWriter) add(l *protocol.LogLine) error {
	if c.n == 0 {
		c.idx.First = append(c.idx.First, c.line)
		c.idx.Offset = append(c.idx.Offset, c.off)
	}
	before := len(c.buf)
	c.buf = appendLine(c.buf, l, -1)
	c.idx.Bytes += int64(len(c.buf) - before)
	c.n++
	c.line++
	if c.n >= archiveChunkLines || len(c.buf) >= archiveChunkBytes {
		return c.flush()
	}
	return nil
}

func (c *chunkWriter) flush() error {
	if c.n == 0 {
		return nil
	}
	c.frame = zenc.EncodeAll(c.buf, c.frame[:0])
	if _, err := c.w.Write(c.frame); err != nil {
		return err
	}
	c.off += int64(len(c.frame))
	c.buf, c.n = c.buf[:0], 0
	return nil
}

// writeArchive streams the first lines lines of a step's log (read through
// scan) into the blob store as the data object, then writes the index, and
// returns the marker that names them. Writing again overwrites both objects
// with the same content, so an archive cut by a crash is simply redone.
func writeArchive(ctx context.Context, blobs blobstore.Store, runID, jobID string, step int, lines, agentOffset int64,
	scan func(fn func(n int, l protocol.LogLine) bool) error) (archiveMarker, error) {
	dataKey, indexKey := archiveKeys(runID, jobID, step)
	idx := &archiveIndex{Version: archiveVersion, RunID: runID, JobID: jobID, Step: step, AgentOffset: agentOffset}
	pr, pw := io.Pipe()
	cw := &chunkWriter{w: pw, idx: idx}
	go func() {
		var werr error
		err := scan(func(n int, l protocol.LogLine) bool {
			if int64(n) >= lines {
				return false
			}
			if int64(n) != cw.line {
				werr = fmt.Errorf("line %d read where %d was expected", n, cw.line)
				return false
			}
			werr = cw.add(&l)
			return werr == nil
		})
		if err == nil {
			err = werr
		}
		if err == nil {
			err = cw.flush()
		}
		if err == nil && cw.line != lines {
			err = fmt.Errorf("read %d lines of %d: the live log lost lines", cw.line, lines)
		}
		pw.CloseWithError(err)
	}()
	info, err := blobs.Put(ctx, dataKey, pr, 0)
	pr.CloseWithError(err) // unblock the writer if Put stopped early
	if err != nil {
		return archiveMarker{}, fmt.Errorf("logstore: archive job %s step %d: %w", jobID, step, err)
	}
	idx.Lines, idx.DataSize, idx.DataSHA256 = cw.line, info.Size, info.SHA256
	body, err := json.Marshal(idx)
	if err != nil {
		return archiveMarker{}, err
	}
	iinfo, err := blobs.Put(ctx, indexKey, bytes.NewReader(body), 0)
	if err != nil {
		return archiveMarker{}, fmt.Errorf("logstore: archive index of job %s step %d: %w", jobID, step, err)
	}
	return archiveMarker{Lines: idx.Lines, AgentOffset: agentOffset, IndexSHA256: iinfo.SHA256, Bytes: idx.Bytes}, nil
}

// loadIndex reads and checks a step's archive index against its marker.
func loadIndex(ctx context.Context, blobs blobstore.Store, runID, jobID string, step int, m *archiveMarker) (*archiveIndex, error) {
	_, indexKey := archiveKeys(runID, jobID, step)
	rc, err := blobs.Open(ctx, indexKey, m.IndexSHA256)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	body, err := io.ReadAll(io.LimitReader(rc, 64<<20))
	if err != nil {
		return nil, err
	}
	var idx archiveIndex
	if err := json.Unmarshal(body, &idx); err != nil {
		return nil, fmt.Errorf("index %s: %w", indexKey, err)
	}
	if idx.Version != archiveVersion || idx.Lines != m.Lines || len(idx.First) != len(idx.Offset) {
		return nil, fmt.Errorf("index %s is not the one its marker names (version %d, %d lines, marker %d)", indexKey, idx.Version, idx.Lines, m.Lines)
	}
	return &idx, nil
}

// chunkOf returns the chunk holding line n (n < Lines).
func (x *archiveIndex) chunkOf(n int64) int {
	return sort.Search(len(x.First), func(i int) bool { return x.First[i] > n }) - 1
}

// chunkEnd returns where chunk i ends in the data object.
func (x *archiveIndex) chunkEnd(i int) int64 {
	if i+1 < len(x.Offset) {
		return x.Offset[i+1]
	}
	return x.DataSize
}

// readChunks reads chunks [from, to) with one ranged read and calls fn
// with each one's first line number and decoded lines.
func readChunks(ctx context.Context, blobs blobstore.Store, x *archiveIndex, from, to int, fn func(first int64, lines []protocol.LogLine) error) error {
	dataKey, _ := archiveKeys(x.RunID, x.JobID, x.Step)
	off := x.Offset[from]
	rc, err := blobstore.OpenRange(ctx, blobs, dataKey, off, x.chunkEnd(to-1)-off)
	if err != nil {
		return err
	}
	raw, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return err
	}
	if int64(len(raw)) != x.chunkEnd(to-1)-off {
		return fmt.Errorf("archive %s: read %d bytes of chunks %d-%d, want %d", dataKey, len(raw), from, to-1, x.chunkEnd(to-1)-off)
	}
	var plain []byte
	for i := from; i < to; i++ {
		frame := raw[x.Offset[i]-off : x.chunkEnd(i)-off]
		plain, err = zdec.DecodeAll(frame, plain[:0])
		if err != nil {
			return fmt.Errorf("archive %s chunk %d: %w", dataKey, i, err)
		}
		lines, err := decodeLines(plain)
		if err != nil {
			return fmt.Errorf("archive %s chunk %d: %w", dataKey, i, err)
		}
		if err := fn(x.First[i], lines); err != nil {
			return err
		}
	}
	return nil
}
