package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"kici.dev/kici/internal/protocol"
)

// jobDirSlots is how many jobs of one identity (jobDirName) can run at
// once on one work root with a stable path each; a job beyond them gets a
// directory of a random name, as every job did before paths were stable.
const jobDirSlots = 8

// makeJobDir creates the job's work directory under root, empty and new,
// at a path that is the same run after run for the same job of the same
// workflow and repository (jobDirName), so that what a cache restores
// keeps working where tools record absolute paths: a virtualenv's
// scripts name their interpreter by path, and Go keys a package compiled
// without -trimpath by its directory. GitLab Runner (builds/<runner>/
// <concurrent id>/<project>), Buildkite and GitHub Actions lay their
// builds out the same way.
//
// The directory is always created by this call (os.Mkdir, which fails on
// anything already there, a link included): a name another job holds,
// or that a crashed job left behind, is never adopted but skipped for
// the next slot (<name>-2, … <name>-8), and when every slot is taken the
// directory gets a random name (os.MkdirTemp). Agents sharing root may
// call it at once. Errors: root cannot be written.
func makeJobDir(root string, d *protocol.JobDispatch) (string, error) {
	name := jobDirName(d)
	for slot := 1; slot <= jobDirSlots; slot++ {
		dir := filepath.Join(root, name)
		if slot > 1 {
			dir += "-" + strconv.Itoa(slot)
		}
		err := os.Mkdir(dir, 0o700)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return os.MkdirTemp(root, "kici-job-")
}

// jobDirName is "kici-job-<job>-<hash>": the job's name made safe for a
// path (at most 40 bytes of [a-z0-9._-], for people reading the work
// root) and 12 hex digits of SHA-256 over the repository URL, workflow
// name, job name and matrix values, which tell jobs apart.
func jobDirName(d *protocol.JobDispatch) string {
	h := sha256.New()
	for _, part := range []string{d.RepoURL, d.WorkflowName, d.JobName} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	keys := make([]string, 0, len(d.MatrixValues))
	for k := range d.MatrixValues {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		h.Write([]byte(k + "=" + d.MatrixValues[k]))
		h.Write([]byte{0})
	}
	return "kici-job-" + pathWord(d.JobName, 40) + "-" + hex.EncodeToString(h.Sum(nil))[:12]
}

// pathWord lower-cases s and keeps letters, digits, '.', '_' and '-',
// turning each run of anything else into one '-', trimmed and cut to max
// bytes; "job" when nothing is left.
func pathWord(s string, max int) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
	}
	w := strings.Trim(b.String(), "-.")
	if len(w) > max {
		w = strings.Trim(w[:max], "-.")
	}
	if w == "" {
		return "job"
	}
	return w
}
