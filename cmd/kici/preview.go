package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/cli/decisiontrace"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/provider/github"
	"kici.dev/kici/internal/trigger"
)

// eventFlags are the flags that describe a simulated event (shared by
// `kici preview` and `kici run local`).
type eventFlags struct {
	branch, targetBranch, sourceBranch, action, tag, repo string
	files                                                 []string
	payload, ghEvent, lock, dir, message                  string
	compile                                               bool
}

func (ef *eventFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&ef.branch, "branch", "", "pushed branch (push; default: the checked-out branch), or target branch of other events")
	f.StringVar(&ef.targetBranch, "target-branch", "", "pull request base branch")
	f.StringVar(&ef.sourceBranch, "source-branch", "", "pull request head branch")
	f.StringSliceVar(&ef.files, "files", nil, "changed files, comma-separated (for paths filters)")
	f.StringVar(&ef.action, "action", "", "event action (opened, created, published, dispatch type, …)")
	f.StringVar(&ef.tag, "tag", "", "tag name (tag events)")
	f.StringVar(&ef.repo, "repo", "", "source repository owner/repo (for repos filters)")
	f.StringVar(&ef.payload, "payload", "", "JSON payload file: a GitHub webhook body with --event, else the event payload")
	f.StringVar(&ef.ghEvent, "event", "", "X-GitHub-Event of --payload: normalize it like the orchestrator does")
	f.StringVar(&ef.lock, "lock", "", "lock file to read (default: .kici/kici.lock.json at the repository root); preview uses FILE as it is, run local checks it against the workflow files it runs")
	f.StringVar(&ef.dir, "dir", ".", "directory inside the repository")
	f.StringVar(&ef.message, "message", "", "commit message for the commitMessage and [skip ci] gates (default: the payload's head_commit.message, else HEAD's message)")
	f.BoolVar(&ef.compile, "compile", false, "compile the workflow files in memory instead of reading the lock file (a stale lock is refused otherwise)")
}

// eventTypeAliases maps CLI event names to normalized event types.
var eventTypeAliases = map[string]string{"pr": "pull_request"}

// buildEvent turns the CLI arguments into the normalized event the
// orchestrator would match. With --event the payload goes through the same
// GitHub normalizer as webhook deliveries; flags then override what they
// set (changed files are never in a webhook body, so --files supplies them).
func (ef *eventFlags) buildEvent(args []string) (*trigger.Event, error) {
	var typ string
	if len(args) > 0 {
		typ = args[0]
		if a, ok := eventTypeAliases[typ]; ok {
			typ = a
		}
	}
	var body []byte
	if ef.payload != "" {
		b, err := os.ReadFile(ef.payload)
		if err != nil {
			return nil, err
		}
		body = b
	}
	var ev *trigger.Event
	switch {
	case ef.ghEvent != "":
		if body == nil {
			return nil, fmt.Errorf("--event needs --payload (the webhook body)")
		}
		nev, _, err := github.Normalize(ef.ghEvent, body)
		if errors.Is(err, provider.ErrUnsupportedEvent) {
			return nil, fmt.Errorf("%v: the orchestrator records this delivery and starts nothing", err)
		}
		if err != nil {
			return nil, err
		}
		if typ != "" && trigger.Kind(typ) != nev.Type {
			return nil, fmt.Errorf("the %s payload normalizes to event type %q, not %q", ef.ghEvent, nev.Type, typ)
		}
		ev = nev
	case typ == "":
		return nil, fmt.Errorf("name the event type (push, tag, pr, comment, …) or give --payload with --event")
	case trigger.Kind(typ) == trigger.KindGenericWebhook:
		// generic_webhook payloads carry the source name; --repo is not it.
		if body == nil {
			body = []byte("{}")
		}
		var p map[string]any
		if err := json.Unmarshal(body, &p); err != nil {
			return nil, fmt.Errorf("--payload: %v", err)
		}
		ev = &trigger.Event{Type: trigger.Kind(typ), Payload: p, TargetBranch: trigger.GenericTargetBranch, Provider: provider.Generic}
	default:
		ev = &trigger.Event{Type: trigger.Kind(typ), Provider: provider.Local}
		if body != nil {
			var p map[string]any
			if err := json.Unmarshal(body, &p); err != nil {
				return nil, fmt.Errorf("--payload must hold a JSON object: %v", err)
			}
			ev.Payload = p
		}
	}
	if ef.branch != "" {
		ev.TargetBranch = ef.branch
	} else if ev.Type == "push" && ev.TargetBranch == "" {
		// Like `kici-admin source trigger-local`: a push is of the branch
		// checked out here unless --branch says otherwise.
		ev.TargetBranch = currentBranch(ef.dir)
	}
	if ef.targetBranch != "" {
		ev.TargetBranch = ef.targetBranch
		if ev.Type == "pull_request" || ev.Type == "review" || ev.Type == "review_comment" {
			ev.BaseBranch = ef.targetBranch
		}
	}
	if ef.tag != "" {
		ev.TargetBranch = ef.tag
	}
	if ef.sourceBranch != "" {
		ev.SourceBranch = ef.sourceBranch
	}
	if ef.action != "" {
		ev.Action = ef.action
	}
	if ef.repo != "" {
		ev.SourceRepo = ef.repo
	}
	if len(ef.files) > 0 {
		ev.ChangedFiles = ef.files
	}
	if ev.Type == "pull_request" && ev.BaseBranch == "" {
		ev.BaseBranch = ev.TargetBranch
	}
	ef.withGateFacts(ev)
	return ev, nil
}

// loadLock reads and validates the lock exactly as the orchestrator does
// (lockfile.Parse).
func (ef *eventFlags) loadLock() (*lockfile.LockFile, string, error) {
	path := ef.lock
	if path == "" {
		root, err := findRoot(ef.dir, false)
		if err != nil {
			return nil, "", err
		}
		path = filepath.Join(root, filepath.FromSlash(lockfile.Path))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, path, fmt.Errorf("%s does not exist: run `kici compile` first (or pass --lock)", rel(path))
		}
		return nil, path, err
	}
	lf, err := lockfile.Parse(data)
	if err != nil {
		return nil, path, fmt.Errorf("%s: %w", rel(path), err)
	}
	return lf, path, nil
}

// PreviewOutput is the JSON `kici preview --json` prints: one decision per
// workflow, in lock order.
type PreviewOutput struct {
	Workflows []trigger.Decision `json:"workflows"`
	// Unroutable has one warning per job of a matched workflow that no
	// scaler label set (--scalers) and no static agent (--labels) serves.
	Unroutable []string `json:"unroutable,omitempty"`
}

func newPreviewCmd(stdout io.Writer) *cobra.Command {
	var ef eventFlags
	var rf routeFlags
	var asJSON bool
	var at string
	cmd := &cobra.Command{
		Use:   "preview [event-type]",
		Short: "Show which workflows an event would start, and why",
		Long: `Simulate an event against the lock file and print, for every workflow,
whether it would run and the trace of checks that decided it. It calls the
same normalizer and matcher as the orchestrator, so the answer is the
orchestrator's answer for that (lock, event) pair.

Event types: push, tag, pr (pull_request), comment, review, review_comment,
release, dispatch, create, delete, status, workflow_run, fork, star, watch,
schedule, kici_event, generic_webhook, workflow_complete, job_complete,
lifecycle, or any raw event name (for webhook triggers). Fields the
matcher reads from the payload (comment body, review state, ref_type, …)
come from --payload. With --payload and --event (an X-GitHub-Event name)
the body is normalized like a real GitHub delivery.

Every job of a workflow that would run is also checked against who could
serve it: the scaler label sets of --scalers (the orchestrator's
scalers.yaml; default $KICI_SCALER_CONFIG_PATH, else the embedded default's
single "local" scaler) and the static agents of --labels. A job whose
runsOn none of them serves is flagged: the orchestrator would mark it
unroutable and fail it after KICI_UNROUTABLE_GRACE_MS.

--json prints {"workflows":[{name, matched, matchedTrigger, checks:[{check,
pattern, value, passed, reason}], summary}], "unroutable":[warning]}
("unroutable" only when a job is flagged).`,
		Example: `  kici preview push --branch main --files src/app.go,README.md
  kici preview pr --action opened --target-branch main --source-branch feature/login
  kici preview tag --tag v1.2.0
  kici preview --payload delivery.json --event pull_request --files src/a.ts
  kici preview kici_event --payload event.json --json
  kici preview schedule --at 2026-03-01T03:00:00+01:00
  kici preview push --branch main --scalers /etc/kici/scalers.yaml --labels linux,gpu`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if at != "" {
				return runPreviewSchedule(stdout, &ef, args, at, asJSON)
			}
			ev, err := ef.buildEvent(args)
			if err != nil {
				return err
			}
			lf, err := ef.loadFreshLock("")
			if err != nil {
				return err
			}
			ds := trigger.MatchAll(lf, ev)
			warns, err := rf.unroutable(lf, ds)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				enc.SetEscapeHTML(false)
				return enc.Encode(PreviewOutput{Workflows: ds, Unroutable: warns})
			}
			printDecisions(stdout, ev, ds)
			if len(warns) > 0 {
				fmt.Fprintln(stdout)
			}
			for _, w := range warns {
				fmt.Fprintln(stdout, "WARN "+w)
			}
			return nil
		},
	}
	ef.register(cmd)
	rf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the decisions as JSON")
	cmd.Flags().StringVar(&at, "at", "", "with event type schedule: an RFC 3339 time; show which schedule triggers fire in that minute")
	return cmd
}

// printDecisions renders decisions for a terminal.
func printDecisions(w io.Writer, ev *trigger.Event, ds []trigger.Decision) {
	desc := string(ev.Type)
	if ev.Action != "" {
		desc += " (" + ev.Action + ")"
	}
	if ev.TargetBranch != "" {
		desc += " on " + ev.TargetBranch
	}
	matched := 0
	for _, d := range ds {
		if d.Matched {
			matched++
		}
	}
	fmt.Fprintf(w, "event: %s — %d of %d workflows would run\n", desc, matched, len(ds))
	decisiontrace.Print(w, traceDecisions(ds))
}

// traceDecisions converts the matcher's decisions to their API form, the
// one the trace printer reads (the two types carry the same fields).
func traceDecisions(ds []trigger.Decision) []apitypes.Decision {
	out := make([]apitypes.Decision, len(ds))
	for i, d := range ds {
		checks := make([]apitypes.Check, len(d.Checks))
		for j, c := range d.Checks {
			checks[j] = apitypes.Check(c)
		}
		out[i] = apitypes.Decision{Name: d.Name, Matched: d.Matched, MatchedTrigger: d.MatchedTrigger, Checks: checks, Summary: d.Summary}
	}
	return out
}

// currentBranch is the branch checked out in dir, or "" (detached HEAD, not
// a git repository).
func currentBranch(dir string) string {
	out, err := exec.Command("git", "-C", dir, "symbolic-ref", "--quiet", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
