package forgestatus

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"time"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trigger"
)

// replyAttempts bounds how often an answer to a comment is tried.
const replyAttempts = 4

// Reply answers a `/kici approve|reject` comment on its pull request or
// issue (GitHub: POST /repos/{repo}/issues/{n}/comments; Gitea:
// POST /api/v1/repos/{owner}/{repo}/issues/{n}/comments; GitLab: POST
// /api/v4/projects/{id}/merge_requests/{iid}/notes, or issues/{iid}/notes).
// It returns at once: the answer is sent in the background, retried on
// 5xx and rate limits a few times, and dropped (logged) if the forge stays
// away, so delivery processing never waits for the forge.
func (r *Reporter) Reply(ctx context.Context, src *store.Source, ev *trigger.Event, text string) {
	if src == nil || ev == nil {
		return
	}
	r.background(ctx, src.ID, ev.SourceRepo, "comment reply", func(ctx context.Context, t *target) error {
		return r.sendReply(ctx, t, ev, text)
	})
}

// background runs send against the source's forge target without
// blocking the caller: retried on 5xx and rate limits up to
// replyAttempts times, dropped (logged as what) on any other error.
// It outlives the caller's ctx (keeping its values) but not Run: when Run
// returns, the call in flight is cancelled and a retry wait ends at once.
func (r *Reporter) background(ctx context.Context, sourceID, repo, what string, send func(context.Context, *target) error) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(r.life, cancel)
	go func() {
		defer stop()
		defer cancel()
		t, ok := r.target(ctx, sourceID)
		if !ok {
			return
		}
		for attempt := range replyAttempts {
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			err := send(cctx, t)
			cancel()
			if err == nil {
				return
			}
			v := classify(err, attempt, r.now())
			r.log.Warn("forge status: "+what+" failed", "repo", repo, "status", v.status, "retry", !v.permanent, "err", v.msg)
			if v.permanent {
				return
			}
			wait := time.NewTimer(min(v.next.Sub(r.now()), 30*time.Second))
			select {
			case <-ctx.Done():
				wait.Stop()
				return
			case <-wait.C:
			}
		}
	}()
}

// RerunCheckName is the check run that answers a refused re-run request.
const RerunCheckName = "kici / re-run"

// RerunRefused shows a refused GitHub "Re-run" request (check_run or
// check_suite rerequested) on the commit it was made on: a completed check
// run named RerunCheckName with conclusion `neutral` (it neither passes
// nor fails the commit: GitHub "Checks" conclusions) whose title says the
// request was refused and whose summary says why. Only GitHub App sources
// receive re-run requests; for any other source it does nothing. Like
// Reply, it returns at once and the check is sent in the background.
func (r *Reporter) RerunRefused(ctx context.Context, src *store.Source, repo, sha string, installation int64, why string) {
	if src == nil || sha == "" {
		return
	}
	r.background(ctx, src.ID, repo, "re-run refusal", func(ctx context.Context, t *target) error {
		if t.provider != store.CheckProviderGitHubChecks {
			return nil
		}
		inst := installation
		if inst == 0 {
			var err error
			if inst, err = r.installation(ctx, t.gh, repo); err != nil {
				return err
			}
		}
		_, err := t.gh.CreateCheckRun(ctx, inst, repo, map[string]any{
			"name": RerunCheckName, "head_sha": sha, "status": checkCompleted, "conclusion": conclusionNeutral,
			"completed_at": r.now().Format(time.RFC3339),
			"output":       map[string]any{"title": "Re-run refused", "summary": truncate(why, maxOutputText)},
		})
		return err
	})
}

func (r *Reporter) sendReply(ctx context.Context, t *target, ev *trigger.Event, text string) error {
	p := ev.Payload
	issue := provider.Int(p, "issue", "number")
	switch t.provider {
	case store.CheckProviderGitHubChecks, store.CheckProviderGitHubStatus:
		inst := int64(0)
		if t.gh.IsApp() {
			if inst = provider.Int(p, "installation", "id"); inst == 0 {
				var err error
				if inst, err = r.installation(ctx, t.gh, ev.SourceRepo); err != nil {
					return err
				}
			}
		}
		return t.gh.CreateIssueComment(ctx, inst, ev.SourceRepo, issue, text)
	case store.CheckProviderGitea:
		owner, name, err := repoParts(ev.SourceRepo)
		if err != nil {
			return err
		}
		body, _ := json.Marshal(map[string]string{"body": text})
		return t.postJSON(ctx, r.http, "/api/v1/repos/"+url.PathEscape(owner)+"/"+url.PathEscape(name)+"/issues/"+strconv.FormatInt(issue, 10)+"/comments", body)
	case store.CheckProviderGitLab:
		kind, iid := "merge_requests", provider.Int(p, "merge_request", "iid")
		if iid == 0 {
			kind, iid = "issues", provider.Int(p, "issue", "iid")
		}
		body, _ := json.Marshal(map[string]string{"body": text})
		return t.postJSON(ctx, r.http, "/api/v4/projects/"+url.PathEscape(ev.SourceRepo)+"/"+kind+"/"+strconv.FormatInt(iid, 10)+"/notes", body)
	}
	return nil
}
