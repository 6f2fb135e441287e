package logstore

import (
	"errors"
	"slices"

	"github.com/klauspost/compress/s2"

	"kici.dev/kici/internal/protocol"
)

// A step_log_chunks body is the chunk's lines as JSON Lines, stored in one
// of two forms told apart by the first byte:
//
//   - '{': the JSON Lines themselves, compressed (or not) by PostgreSQL's
//     TOAST; the only form releases before compressed chunks read;
//   - chunkS2 (0x00): the JSON Lines as one S2 block
//     (github.com/klauspost/compress/s2's block format, s2.Encode), written
//     while PG.SetCompress is on.
//
// Compressing in the orchestrator, not in TOAST, sends the server a
// fraction of the bytes, spares it compressing them, and spares the client
// encoding megabytes of parameters per append: an append of 20,000 lines
// took a third of the time (docs/performance.md). The orchestrator turns
// it on only while every recent node reads the second form, and a rollback
// rewrites it into the first (PlainChunks), so that a cluster can run this
// release beside, and roll back to, releases that read only the first.
const chunkS2 = 0x00

// appendPackedChunk appends the stored body of the JSON Lines plain to dst.
func appendPackedChunk(dst, plain []byte) []byte {
	dst = slices.Grow(dst, 1+s2.MaxEncodedLen(len(plain)))
	dst = append(dst, chunkS2)
	enc := s2.Encode(dst[len(dst):cap(dst)], plain) // written in place: Grow made room
	return dst[:len(dst)+len(enc)]
}

// errChunkForm is a body in neither form.
var errChunkForm = errors.New("logstore: unknown chunk body form")

// unpackChunk decodes a stored body into its lines.
func unpackChunk(body []byte) ([]protocol.LogLine, error) {
	if len(body) == 0 || body[0] == '{' {
		return decodeLines(body)
	}
	plain, err := plainBody(body)
	if err != nil {
		return nil, err
	}
	return decodeLines(plain)
}
