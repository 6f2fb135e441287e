package lockfile

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"kici.dev/kici/internal/pieces"
)

// DriftCheck is what the agent needs to detect drift between a job's
// workflow file at the run's commit and the lock the run was built from.
// The compiler never writes it; the orchestrator adds it to each job's
// config when it creates the run (kici).
type DriftCheck struct {
	// File is the workflow file, repo-relative (Workflow.Source.File).
	File string `json:"file"`
	// ContentHash is the workflow's contentHash in the lock.
	ContentHash string `json:"contentHash"`
	// Warn downgrades a mismatch to a warning in the job log (YAML
	// `drift: warn`).
	Warn bool `json:"warn,omitempty"`
	// Pieces are the piece files of the workflow's own repository it was
	// expanded from (Workflow.Pieces without a library): each must still
	// have its contentHash (sha256 of the bytes, hex) at the run's commit.
	Pieces []PieceCheck `json:"pieces,omitempty"`
	// LibraryDrift are the warnings the orchestrator found about the
	// workflow's library pieces when it created the run (LibraryDrift): a
	// pinned tag or branch that now names another commit, or a library it
	// could not ask. The agent writes them into the job's setup log; they
	// never fail the job (the lock's copy of the piece is what runs).
	LibraryDrift []string `json:"libraryDrift,omitempty"`
}

// LibraryDrift checks wf's library pieces against their remotes: resolve
// returns the commit a library's ref names now (pieces.RefResolver). Each
// library (git URL and ref) is asked once. The result has one line per
// library whose ref moved ("library drift: library ci ref v3 now resolves
// to <12 hex>; the lock has <12 hex> (piece ci:p.yaml) …") or that could
// not be asked ("library drift not checked: …"); nil when all match or
// the workflow uses no library, or pins full commit ids.
func LibraryDrift(wf *Workflow, resolve func(git, ref string) (string, error)) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range wf.Pieces {
		key := p.Git + "\x00" + p.Ref
		if p.Library == "" || p.Commit == "" || seen[key] || pieces.IsCommit(p.Ref) {
			continue
		}
		seen[key] = true
		now, err := resolve(p.Git, p.Ref)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("library drift not checked: library %s (%s) ref %s: %v", p.Library, p.Git, p.Ref, err))
		case now != p.Commit:
			out = append(out, fmt.Sprintf("library drift: library %s ref %s now resolves to %s; the lock has %s (piece %s): this run uses the locked piece; run `kici compile` and commit the lock to take the new commit",
				p.Library, p.Ref, short(now), short(p.Commit), p.Label()))
		}
	}
	return out
}

// PieceCheck is one repository piece file a DriftCheck verifies.
type PieceCheck struct {
	File        string `json:"file"`
	ContentHash string `json:"contentHash"`
}

// NewDriftCheck returns the drift check of wf's jobs, or nil when the lock
// does not name a YAML source file.
func NewDriftCheck(wf *Workflow) *DriftCheck {
	f := wf.Source.File
	if !strings.HasSuffix(f, ".yaml") && !strings.HasSuffix(f, ".yml") {
		return nil
	}
	c := &DriftCheck{File: f, ContentHash: wf.ContentHash, Warn: wf.Drift == "warn"}
	for _, p := range wf.Pieces {
		if p.Library == "" {
			c.Pieces = append(c.Pieces, PieceCheck{File: p.File, ContentHash: p.ContentHash})
		}
	}
	return c
}

// pieceDriftMessage is the error when a piece file a workflow was expanded
// from changed (or went away) without the lock being recompiled.
func pieceDriftMessage(piece, file, lockName string) string {
	return fmt.Sprintf("workflow drift: piece %s, used by %s, does not match the lock file %s (its contentHash differs): run `kici compile` and commit both", piece, file, lockName)
}

// DriftMessage is the error of a job (and of `kici preview` / `kici run
// local`) whose workflow file no longer matches the lock file.
func DriftMessage(file string) string { return driftMessage(file, Path) }

func driftMessage(file, lockName string) string {
	return fmt.Sprintf("workflow drift: %s does not match the lock file %s (its contentHash differs): run `kici compile` and commit both", file, lockName)
}

// DriftMissingMessage is the error when the workflow file the lock names
// does not exist.
func DriftMissingMessage(file string) string { return driftMissingMessage(file, Path) }

func driftMissingMessage(file, lockName string) string {
	return fmt.Sprintf("workflow drift: %s, named by the lock file %s, does not exist: run `kici compile` and commit both", file, lockName)
}

// Verify compares the file under root with the check: "" when it matches,
// else DriftMessage or DriftMissingMessage. A path that leaves root is
// reported as missing (the lock is untrusted input).
func (c *DriftCheck) Verify(root string) string { return c.verify(root, Path) }

// verify is Verify with the lock file named lockName in the message.
func (c *DriftCheck) verify(root, lockName string) string {
	clean := filepath.Clean(filepath.FromSlash(c.File))
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return driftMissingMessage(c.File, lockName)
	}
	src, err := os.ReadFile(filepath.Join(root, clean))
	if err != nil {
		return driftMissingMessage(c.File, lockName)
	}
	if WorkflowContentHash(src) != c.ContentHash {
		return driftMessage(c.File, lockName)
	}
	for _, p := range c.Pieces {
		clean := filepath.Clean(filepath.FromSlash(p.File))
		if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
			return pieceDriftMessage(p.File, c.File, lockName)
		}
		data, err := os.ReadFile(filepath.Join(root, clean))
		sum := sha256.Sum256(data)
		if err != nil || hex.EncodeToString(sum[:]) != p.ContentHash {
			return pieceDriftMessage(p.File, c.File, lockName)
		}
	}
	return ""
}

// StaleLockError lists the ways a lock file disagrees with the workflow
// files of a tree; its message has one line per problem.
type StaleLockError struct{ Problems []string }

func (e *StaleLockError) Error() string { return strings.Join(e.Problems, "\n") }

// CheckTree checks a lock against the workflow files under root: each
// workflow's file must exist and match its contentHash, and every workflow
// file must be in the lock. It returns nil or a *StaleLockError.
func CheckTree(lf *LockFile, root string) error { return CheckTreeNamed(lf, root, Path) }

// CheckTreeNamed is CheckTree for a lock read from elsewhere than root's
// .kici/kici.lock.json (`--lock FILE`): the problems name lockName.
func CheckTreeNamed(lf *LockFile, root, lockName string) error {
	var problems []string
	inLock := map[string]bool{}
	for i := range lf.Workflows {
		wf := &lf.Workflows[i]
		inLock[wf.Source.File] = true
		if c := NewDriftCheck(wf); c != nil {
			if msg := c.verify(root, lockName); msg != "" {
				problems = append(problems, msg)
			}
		}
	}
	entries, err := os.ReadDir(filepath.Join(root, filepath.FromSlash(WorkflowDir)))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, ".") || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			continue
		}
		if rel := WorkflowDir + "/" + n; !inLock[rel] {
			problems = append(problems, fmt.Sprintf("workflow drift: %s is not in the lock file %s: run `kici compile` and commit both", rel, lockName))
		}
	}
	if len(problems) > 0 {
		return &StaleLockError{Problems: problems}
	}
	return nil
}
