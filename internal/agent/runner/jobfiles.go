package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"kici.dev/kici/internal/agent/transfer"
	"kici.dev/kici/internal/lockfile"
)

// jobIdentity is who a job's files belong to and where its own
// directories are, as caches and artifacts need them: the job's Identity
// (identity.go: its own uid on a root agent, else the agent's step user or
// the agent's own user) plus the checkout.
type jobIdentity struct {
	// User is the identity pack and unpack run as; nil runs them in the
	// agent's own process, whose user is then the job's.
	User *StepUser
	// Workspace, Home and Tmp are the host paths of the job's checkout,
	// HOME and private temporary directory ("" when the job has none).
	Workspace, Home, Tmp string
}

// identity returns the job's identity (see jobIdentity). Home is set only
// for a HOME of the job's own: a shared HOME keeps every job's state, so
// packing it would upload what other jobs left there.
func (j *job) identity() jobIdentity {
	return jobIdentity{User: j.ident.User, Workspace: j.srcDir, Home: j.ident.Home, Tmp: j.ident.Tmp}
}

// cacheRoot resolves one cache path of the lock to the directory it names
// in the job, refusing what lockfile.SplitCachePath refuses (a hand-written
// lock is checked again here) and a job without that directory.
func (id jobIdentity) cacheRoot(p string) (transfer.Root, error) {
	base, rel, err := lockfile.SplitCachePath(p)
	if err != nil {
		return transfer.Root{}, err
	}
	dir := map[lockfile.CacheBase]string{lockfile.CacheInWorkspace: id.Workspace, lockfile.CacheInHome: id.Home, lockfile.CacheInTmp: id.Tmp}[base]
	if dir == "" {
		if base == lockfile.CacheInHome {
			return transfer.Root{}, fmt.Errorf("cache path %q is in the agent's shared HOME (caches under ~ need a per-job HOME: KICI_AGENT_JOB_HOME=true or a job container)", p)
		}
		return transfer.Root{}, fmt.Errorf("cache path %q: the job has no %s directory", p, base)
	}
	root := transfer.Root{Dir: filepath.Join(dir, filepath.FromSlash(rel)), Base: dir}
	if err := transfer.CheckRoot(root); err != nil {
		return transfer.Root{}, fmt.Errorf("cache path %q: %w", p, err)
	}
	return root, nil
}

// packAs writes roots as an archive to w with the job's credentials.
func (j *job) packAs(ctx context.Context, w io.Writer, roots []transfer.Root) (transfer.Stats, error) {
	res, err := j.transferAs(ctx, transfer.OpPack, transfer.ChildRequest{Roots: roots}, nil, w)
	return res.Stats, err
}

// unpackAs extracts the archive r into roots with the job's credentials;
// the returned paths are what it created (for undoAs).
func (j *job) unpackAs(ctx context.Context, r io.Reader, roots []transfer.Root) (transfer.Stats, []string, error) {
	res, err := j.transferAs(ctx, transfer.OpUnpack, transfer.ChildRequest{Roots: roots}, r, nil)
	return res.Stats, res.Created, err
}

// undoAs removes what an unpack created, with the job's credentials.
func (j *job) undoAs(created []string) {
	if len(created) > 0 {
		_, _ = j.transferAs(context.WithoutCancel(j.ctx), transfer.OpUndo, transfer.ChildRequest{Created: created}, nil, nil)
	}
}

// transferAs runs one transfer operation as the job's user: in this
// process when the agent's user is the job's, otherwise in the agent
// binary re-executed as a child with the step user's uid and gid (and no
// supplementary groups), so the root agent never reads or writes a job
// path itself.
func (j *job) transferAs(ctx context.Context, op transfer.Op, req transfer.ChildRequest, in io.Reader, out io.Writer) (transfer.ChildResult, error) {
	id := j.identity()
	if in == nil {
		in = bytes.NewReader(nil)
	}
	if out == nil {
		out = io.Discard
	}
	if id.User == nil {
		res := transfer.RunChild(op, req, in, out)
		return res, resultErr(res)
	}
	if j.r.opts.AgentBinary == "" {
		return transfer.ChildResult{}, errors.New("this agent runs steps as another user but has no binary to pack and unpack as that user (caches and artifacts need kici-agent)")
	}
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return transfer.ChildResult{}, err
	}
	resR, resW, err := os.Pipe()
	if err != nil {
		reqR.Close()
		reqW.Close()
		return transfer.ChildResult{}, err
	}
	cmd := exec.CommandContext(ctx, execPathAs(j.r.opts.AgentBinary), transfer.ChildArg, string(op))
	cmd.Env = []string{} // nothing of the agent's environment
	cmd.Dir = "/"
	cmd.Stdin, cmd.Stdout = in, out
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.ExtraFiles = []*os.File{reqR, resW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: id.User.credential(), Setpgid: true}
	err = cmd.Start()
	reqR.Close()
	resW.Close()
	if err != nil {
		reqW.Close()
		resR.Close()
		return transfer.ChildResult{}, fmt.Errorf("start the transfer as %s: %w", id.User, err)
	}
	go func() {
		_ = json.NewEncoder(reqW).Encode(req)
		reqW.Close()
	}()
	var res transfer.ChildResult
	decErr := json.NewDecoder(resR).Decode(&res)
	resR.Close()
	waitErr := cmd.Wait()
	if decErr != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		return res, fmt.Errorf("transfer as %s: %v %s", id.User, waitErr, bytes.TrimSpace(stderr.Bytes()))
	}
	return res, resultErr(res)
}

func resultErr(res transfer.ChildResult) error {
	if res.Error != "" {
		return errors.New(res.Error)
	}
	return nil
}

// selfExe is the path through which a process reaches its own executable
// without naming the directories above it.
const selfExe = "/proc/self/exe"

// execPathAs is the path to execute bin by in a child that has already
// taken another user's identity. The step user may not be allowed to
// search the directories that hold the agent's binary (a private
// directory, a 0700 temporary directory, root's home), and execve checks
// the path as the new user. When bin is this process's own executable, the
// child reaches it through /proc/self/exe, a link to the file itself that
// needs no search permission on those directories; any other bin (a test's
// stand-in) is executed by its path.
func execPathAs(bin string) string {
	self, err := os.Executable()
	if err != nil {
		return bin
	}
	a, errA := os.Stat(bin)
	b, errB := os.Stat(self)
	if errA == nil && errB == nil && os.SameFile(a, b) {
		return selfExe
	}
	return bin
}
