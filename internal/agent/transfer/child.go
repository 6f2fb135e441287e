package transfer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// ChildArg is the first argument that makes kici-agent run one transfer
// operation as a child process instead of an agent: the agent starts it
// with the job's own credentials (its uid and gid), so packing a cache or
// artifact reads only what the job's steps could read, and unpacking one
// writes only where they could write — never as root on host paths. It is
// not a user-facing command.
//
// The child is started as `kici-agent __kici-transfer <op>` with op one of
// OpPack (archive to stdout), OpUnpack (archive from stdin) or OpUndo
// (remove the paths a failed unpack created). It reads its ChildRequest as
// JSON from file descriptor 3 and writes its ChildResult as JSON to file
// descriptor 4.
const ChildArg = "__kici-transfer"

// Op is the operation a transfer child runs, its argument after ChildArg:
// OpPack, OpUnpack or OpUndo (a kici-agent internal vocabulary).
type Op string

// Operations of a transfer child.
const (
	// OpPack writes an archive of ChildRequest.Roots to stdout.
	OpPack Op = "pack"
	// OpUnpack extracts an archive from stdin under ChildRequest.Roots.
	OpUnpack Op = "unpack"
	// OpUndo removes the paths a failed unpack created (ChildRequest.Created).
	OpUndo Op = "undo"
)

// ChildRequest is the input of a transfer child.
type ChildRequest struct {
	// Roots are the archive's roots (OpPack, OpUnpack).
	Roots []Root `json:"roots,omitempty"`
	// Created are the paths to remove (OpUndo), deepest last.
	Created []string `json:"created,omitempty"`
}

// ChildResult is the output of a transfer child.
type ChildResult struct {
	Stats
	// Created are the paths OpUnpack created (for a later OpUndo).
	Created []string `json:"created,omitempty"`
	// Error is why the operation failed ("" on success).
	Error string `json:"error,omitempty"`
}

// ChildMain runs the transfer child with its arguments (os.Args[1:],
// starting with ChildArg) and returns the process's exit code: 0 when the
// operation succeeded, 1 when it failed (the reason is in the result), 2
// when the request could not be read.
func ChildMain(args []string) int {
	if len(args) != 2 || args[0] != ChildArg {
		fmt.Fprintln(os.Stderr, "usage: kici-agent "+ChildArg+" pack|unpack|undo (started by the agent)")
		return 2
	}
	reqFile, resFile := os.NewFile(3, "request"), os.NewFile(4, "result")
	if reqFile == nil || resFile == nil {
		fmt.Fprintln(os.Stderr, ChildArg+": file descriptors 3 and 4 must be open")
		return 2
	}
	var req ChildRequest
	if err := json.NewDecoder(reqFile).Decode(&req); err != nil {
		fmt.Fprintln(os.Stderr, ChildArg+": request:", err)
		return 2
	}
	res := RunChild(Op(args[1]), req, os.Stdin, os.Stdout)
	if err := json.NewEncoder(resFile).Encode(res); err != nil {
		return 2
	}
	if res.Error != "" {
		return 1
	}
	return 0
}

// RunChild performs one operation of a transfer child in this process: in
// the child itself, or in the agent where the agent's user is the job's.
// A failed unpack undoes what it created.
func RunChild(op Op, req ChildRequest, in io.Reader, out io.Writer) ChildResult {
	var res ChildResult
	var err error
	switch op {
	case OpPack:
		res.Stats, err = Pack(out, req.Roots)
	case OpUnpack:
		res.Stats, res.Created, err = Unpack(in, req.Roots)
		if err == nil {
			// Drain the compressed stream's tail so the sender's digest
			// covers every byte.
			_, err = io.Copy(io.Discard, in)
		}
		if err != nil {
			Undo(res.Created)
			res.Created = nil
		}
	case OpUndo:
		Undo(req.Created)
	default:
		err = errors.New("unknown operation " + string(op))
	}
	if err != nil {
		res.Error = err.Error()
	}
	return res
}
