package ingest

import (
	"context"
	"fmt"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/pieces"
)

// LibraryResolver tells which commit a library's ref names now
// (pieces.RefResolver: `git ls-remote`, cached and bounded in time).
type LibraryResolver interface {
	Resolve(ctx context.Context, url, ref string) (string, error)
}

// libraryDrift returns wf's library drift warnings for a run about to be
// created (lockfile.LibraryDrift): a pinned tag or branch of a library
// that moved since the lock was compiled, or a library that could not be
// asked. They also join tr.Warnings (the run page shows them). Warnings
// never stop the run; an unreachable library costs at most the
// resolver's timeout, once per cache period.
func (p *Processor) libraryDrift(ctx context.Context, tr *Trace, wf *lockfile.Workflow) []string {
	has := false
	for _, pc := range wf.Pieces {
		if pc.Library != "" && !pieces.IsCommit(pc.Ref) {
			has = true
			break
		}
	}
	if !has {
		return nil
	}
	p.libOnce.Do(func() {
		if p.libraries == nil {
			p.libraries = &pieces.RefResolver{}
		}
	})
	out := lockfile.LibraryDrift(wf, func(git, ref string) (string, error) {
		return p.libraries.Resolve(ctx, git, ref)
	})
	for _, w := range out {
		p.log.Warn("ingest: "+w, "workflow", wf.Name)
		tr.Warnings = append(tr.Warnings, fmt.Sprintf("workflow %q: %s", wf.Name, w))
	}
	return out
}
