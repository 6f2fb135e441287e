package runner

import (
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
)

// SweepWorkRoot takes back what ended jobs left in the work root and no
// later job takes back on its own: the directories of crashed jobs whose
// name does not run again (a random name, a job since renamed) and those
// moved aside whose removal failed. It moves them aside, holding the work
// root's claim as a job start does, and returns the function that removes
// them, which can take long for a big tree; nil when there is nothing to
// remove. The agent calls both once, in the background, when it starts:
// a job starting meanwhile takes the same claim, and the sweep takes no
// directory a job holds, so neither waits for the other beyond the claim.
func (r *Runner) SweepWorkRoot() (remove func()) {
	return sweepLeftovers(r.opts.WorkRoot, r.opts.Logger)
}

// sweepLeftovers is SweepWorkRoot for root, logging to log: one line per
// directory removed or that could not be, nothing else above debug. It
// takes only what makeJobDir would take back (reclaimRuleOf, takeIfLeft)
// and only entries named kici-job-*, and nothing where the claim cannot
// be had (no flock, or held past claimWait): a job's directory is made
// and locked with the claim held, but for the one a job makes when the
// claim stayed held past claimWait, which ownName does not match.
func sweepLeftovers(root string, log *slog.Logger) (remove func()) {
	claim, locks, err := lockClaim(root)
	switch {
	case err != nil: // not made yet: no job ran there
		log.Debug("work root not swept", "root", root, "err", err)
		return nil
	case claim == nil && locks:
		log.Debug("work root not swept: its lock was held for "+claimWait.String()+" by something else", "root", root)
		return nil
	case claim == nil:
		log.Debug("work root not swept: its file system has no flock", "root", root)
		return nil
	}
	left := leftovers(root, claim, log)
	claim.Close()
	if len(left) == 0 {
		return nil
	}
	return func() {
		for _, l := range left {
			if err := l.remove(); err != nil {
				log.Warn("could not remove a work directory an ended job left; the agent's next start tries again", "dir", l.was, "movedAsideAs", l.path, "err", err)
			} else {
				log.Info("removed a work directory an ended job left", "dir", l.was, "movedAsideAs", l.path)
			}
		}
	}
}

// leftovers takes, with the claim on root held, every kici-job-* entry of
// root that an ended job left: one already moved aside is taken where it
// is, any other is moved aside (moveAsideIfLeft), each locked until
// removed so that no other agent removes it at once.
func leftovers(root string, claim *os.File, log *slog.Logger) []*leftDir {
	rule := reclaimRuleOf(claim)
	if !rule.may {
		log.Debug("work root not swept: others than the agent's user may write it", "root", root)
		return nil
	}
	entries, err := claim.ReadDir(-1)
	if err != nil {
		log.Warn("could not read the work root to sweep it", "root", root, "err", err)
		return nil
	}
	var left []*leftDir
	for _, e := range entries {
		name := e.Name()
		if !ownName.MatchString(name) {
			continue
		}
		dir := filepath.Join(root, name)
		var l *leftDir
		if isAside(name) {
			l, _ = takeIfLeft(dir, rule.anyOwner)
		} else {
			l = moveAsideIfLeft(dir, rule.anyOwner)
		}
		if l != nil {
			left = append(left, l)
		}
	}
	return left
}

// ownName matches the names this version gives job directories and
// their leftovers: kici-job-<job>-<8 hex> (jobDirName) with its slot
// -2 … -8, kici-job-random-<digits> (randomJobDir), each perhaps moved
// aside (.left-<12 hex>). Agents of earlier versions named theirs
// otherwise (kici-job-<digits>, longer hashes) and did not always lock
// them while their job ran, so such a directory may be a running job's of
// an older agent sharing the work root: the sweep never takes them.
var ownName = regexp.MustCompile(`^kici-job-(random-[0-9]+|[a-z0-9._-]{1,16}-[0-9a-f]{8}(-[2-8])?)(\.left-[0-9a-f]{12})?$`)
