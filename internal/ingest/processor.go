// Package ingest turns persisted deliveries into runs: for a local-source
// push it reads the lock file at the pushed commit, normalizes the event,
// matches every workflow's triggers (first passing trigger wins, KiCI
// matcher), records the decision trace on the delivery and creates one run
// per matched workflow, with one job per matrix leg and needs expanded per
// leg (see docs/kici-compatibility.md#matching and #runs-and-statuses).
//
// Deliveries are processed by a bounded pool of workers (Workers), at most
// one at a time per source and ref, in arrival order (pool.go), so a push's
// runs are created in delivery order while unrelated deliveries proceed in
// parallel. Submit is non-blocking; a delivery that does not fit in the
// buffer is still in the store with status "received" and is picked up by
// the re-scan of store.ListUnprocessedDeliveries, so nothing accepted is
// lost. A delivery
// is processed by one node at a time (a claim with a lease in the store,
// claim.go), and a re-processing after a crash does not create a second
// run for a workflow that already has one for the same delivery.
package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/groupcommit"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/provider/local"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trigger"
)

// Defaults of a Processor.
const (
	// DefaultQueueSize is the Submit buffer.
	DefaultQueueSize = 4096
	// DefaultRescanInterval is how often unprocessed deliveries are re-listed.
	DefaultRescanInterval = 5 * time.Second
	// DefaultProcessTimeout bounds the processing of one delivery.
	DefaultProcessTimeout = 2 * time.Minute
	// rescanBatch is how many unprocessed deliveries one re-scan takes.
	rescanBatch = 100
	// maxTracedFiles caps the changed files recorded in a Trace.
	maxTracedFiles = 300
)

// Trace is the decision record of a processed delivery, stored with its
// event-log entry; the admin API serves it as it is.
type Trace = apitypes.Trace

// RunRef is a run a delivery created.
type RunRef = apitypes.RunRef

// Processor turns persisted deliveries into runs. Create it with
// NewProcessor; it is safe for concurrent use.
type Processor struct {
	st        store.Store
	tracker   *runs.Tracker
	log       *slog.Logger
	settings  *cluster.Reader
	libraries LibraryResolver // librarydrift.go
	libOnce   sync.Once
	finisher  *groupcommit.Queue[store.DeliveryFinish] // finishgroup.go

	// RescanInterval is the period of the unprocessed-delivery re-scan
	// (DefaultRescanInterval when zero). Set before Start.
	RescanInterval time.Duration
	// ProcessTimeout bounds one delivery (DefaultProcessTimeout when zero).
	ProcessTimeout time.Duration
	// Workers is how many deliveries are processed at once
	// (DefaultWorkers when zero). Set before Start.
	Workers int
	// ClaimTTL is the lease of a delivery claim (DefaultClaimTTL when
	// zero; claim.go). Set before Start.
	ClaimTTL time.Duration
	// Forges reads locks from forges (GitHub); nil = NewForges(0) on first use.
	Forges *Forges
	// groups records runs in their concurrency group (concurrency.go).
	groups GroupEnterer

	ch chan submitted

	mu      sync.Mutex
	claimed map[string]bool
	// runless are the claimed deliveries no stored run names yet (the
	// claim reported so, store.DeliveryClaimStore.TakeDelivery): their
	// processing need not look for runs it would otherwise not create
	// twice (matchruns.go). Guarded by mu.
	runless map[string]bool
	// nodeID holds this processor's store claims (claim.go); guarded by mu.
	nodeID string
	// repos are the local repositories read so far, by path (pool.go).
	repos map[string]*local.Repo
	// heads caches each local repository's HEAD ref (pool.go).
	heads map[string]headRefEntry
	// The optional collaborators of ProcessorDeps, fixed at construction.
	outcome      func(status string, runs int) // finished deliveries (pool.go)
	decider      Decider                       // `/kici approve` comments (trust.go)
	replier      Replier                       // answers to those comments (forgeevents.go)
	rerunRefused RerunRefuser                  // refused re-run requests shown on the forge (forgeevents.go)
	forkIgnored  func()                        // fork pull requests dropped by policy (trust.go)

	startOnce sync.Once
	cancel    context.CancelFunc
	done      chan struct{}
	// running is true from Start until the loop has stopped taking
	// deliveries in: only then does ClaimOnAccept claim (accepted.go).
	running atomic.Bool
}

// ProcessorDeps are a processor's optional collaborators; every nil field
// turns its feature off.
type ProcessorDeps struct {
	// Forges reads locks from forges (GitHub); nil = NewForges(0).
	Forges *Forges
	// Concurrency records runs in their workflow concurrency group
	// (runctl.Controller); nil ignores workflow concurrency settings.
	Concurrency GroupEnterer
	// Decider enables `/kici approve|reject <runId>` pull-request comments;
	// nil matches such comments against workflows like any other.
	Decider Decider
	// Replier answers those comments on the forge, refusals included.
	Replier Replier
	// RerunRefused shows a refused GitHub re-run request on its commit;
	// nil leaves the refusal in the event log only.
	RerunRefused RerunRefuser
	// ForkIgnored is called once for every fork pull request dropped under
	// fork policy ignore (KiCI's kici_orch_fork_events_ignored_total).
	ForkIgnored func()
	// Outcome is called once per delivery finished, with its status
	// ("processed" or "failed") and how many runs it created (metrics).
	Outcome func(status string, runs int)
	// NodeID holds this processor's delivery claims (claim.go): the node's
	// id, kept across restarts; "" = an id of the processor's own.
	NodeID string
	// Settings reads the live cluster settings; organization-wide
	// workflows (cluster.GlobalWorkflowsEnabled) stay off without it.
	Settings *cluster.Reader
	// Libraries resolves library refs for the run-time library drift
	// check (librarydrift.go); nil = a pieces.RefResolver with its
	// defaults (https only, 5 s per remote, answers kept 5 minutes).
	Libraries LibraryResolver
}

// NewProcessor returns a processor that reads deliveries from st and creates
// runs through tracker, with the optional collaborators of deps. A nil
// logger discards logs.
func NewProcessor(st store.Store, tracker *runs.Tracker, logger *slog.Logger, deps ProcessorDeps) *Processor {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Processor{st: st, tracker: tracker, log: logger, ch: make(chan submitted, DefaultQueueSize),
		claimed: map[string]bool{}, runless: map[string]bool{}, Forges: deps.Forges, groups: deps.Concurrency, decider: deps.Decider,
		replier: deps.Replier, rerunRefused: deps.RerunRefused, forkIgnored: deps.ForkIgnored, outcome: deps.Outcome, nodeID: deps.NodeID, settings: deps.Settings,
		libraries: deps.Libraries, finisher: newFinishGroup(st)}
}

// Start launches the workers: they first process every delivery still
// "received" (left over from a previous process), then ids sent to Submit,
// and re-scan for unprocessed deliveries every RescanInterval. They stop when ctx is cancelled or Stop is called. Calling Start again is a
// no-op.
func (p *Processor) Start(ctx context.Context) {
	p.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(ctx)
		p.cancel = cancel
		p.done = make(chan struct{})
		p.running.Store(true)
		go p.loop(ctx)
	})
}

// Stop stops the workers and waits for the deliveries being processed, if
// any, to finish (its processing is not interrupted). Safe to call without Start
// and more than once.
func (p *Processor) Stop() {
	p.startOnce.Do(func() {}) // a later Start becomes a no-op
	if p.cancel == nil {
		return
	}
	p.cancel()
	<-p.done
	p.closeRepos()
}

// Submit queues a persisted delivery id for processing without blocking. If
// the buffer is full the id is dropped here and the re-scan picks the
// delivery up from the store.
func (p *Processor) Submit(deliveryID string) {
	p.submit(submitted{id: deliveryID})
}

// SubmitDelivery is Submit for a delivery whose row is in hand (the
// webhook ingress has just stored it): its order key is taken from d, so
// scheduling it reads nothing from the store (webhook.Submitter).
func (p *Processor) SubmitDelivery(d *store.Delivery) {
	if d.Status != store.DeliveryReceived {
		return
	}
	p.submit(submitted{id: d.ID, key: orderKey(d)})
}

func (p *Processor) submit(sub submitted) {
	select {
	case p.ch <- sub:
	default:
		p.log.Warn("ingest: submit buffer full; delivery left for re-scan", "deliveryId", sub.id)
	}
}

// processLogged processes one delivery to completion even if ctx is
// cancelled meanwhile (Stop waits for it), bounded by ProcessTimeout.
func (p *Processor) processLogged(ctx context.Context, id string, h *handed) {
	if err := p.process(context.WithoutCancel(ctx), id, h); err != nil {
		p.log.Error("ingest: process delivery", "deliveryId", id, "error", err)
	}
}

// claim marks id as being processed by this process; false if it already is
// (or was, without its outcome being stored).
func (p *Processor) claim(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.claimed[id] {
		return false
	}
	p.claimed[id] = true
	return true
}

// hasNoRuns reports whether the claim of delivery id found no stored run
// naming it.
func (p *Processor) hasNoRuns(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runless[id]
}

func (p *Processor) unclaim(id string) {
	p.mu.Lock()
	delete(p.claimed, id)
	delete(p.runless, id)
	p.mu.Unlock()
}

// Process handles one delivery: if it is still "received", it is matched,
// its runs are created and it is finished as "processed" (possibly with no
// runs; the reason is in the trace summary) or "failed" (Error says why).
// A delivery already processed, or being processed by this process, is left
// alone (nil), and so is one claimed by another node (claim.go). The returned error reports store failures; a delivery that
// cannot be turned into runs is not an error of Process, it is recorded on
// the delivery.
func (p *Processor) Process(ctx context.Context, deliveryID string) error {
	return p.process(ctx, deliveryID, nil)
}

// process is Process with, when h is not nil, the delivery's row and
// source as the ingress handed them over (accepted.go).
func (p *Processor) process(ctx context.Context, deliveryID string, h *handed) error {
	if !p.claim(deliveryID) {
		return nil
	}
	timeout := p.ProcessTimeout
	if timeout <= 0 {
		timeout = DefaultProcessTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	// Every node re-scans the deliveries still "received": the store claim
	// decides which one processes this delivery.
	// The claim returns the delivery as it wrote it: still "received",
	// and now this node's (a delivery this node accepted is this node's
	// from its insert on).
	d, runsStored, err := p.take(ctx, deliveryID, h)
	if err != nil || d == nil {
		p.unclaim(deliveryID)
		if err != nil {
			return fmt.Errorf("ingest: claim delivery %s: %w", deliveryID, err)
		}
		return nil
	}
	if !runsStored {
		p.mu.Lock()
		p.runless[deliveryID] = true
		p.mu.Unlock()
	}
	var staged stagedRuns
	var lost atomic.Bool
	stopRenewing := p.keepClaim(ctx, deliveryID, func() { lost.Store(true); cancel() })
	tr, procErr := p.handle(ctx, d, h, &staged)
	stopRenewing()
	if lost.Load() {
		// The node that took the claim over finishes the delivery.
		p.unclaim(deliveryID)
		return fmt.Errorf("ingest: delivery %s: claim lost to another node", deliveryID)
	}
	status, errText := store.DeliveryProcessed, ""
	if procErr != nil {
		status, errText = store.DeliveryFailed, procErr.Error()
		if tr.Summary == "" {
			tr.Summary = "failed: " + errText
		}
	}
	raw, err := json.Marshal(tr)
	if err != nil {
		return fmt.Errorf("ingest: encode trace: %w", err)
	}
	// The staged runs are stored with the outcome, all or nothing. If that
	// fails, nothing was written and the re-scan may retry; only when the
	// trace also names runs stored earlier (a re-processing) is the claim
	// kept, as before, until the process restarts.
	err = p.finisher.Do(ctx, store.DeliveryFinish{ID: deliveryID, Status: status, Error: errText, Decisions: raw,
		Outcome: outcomeOf(tr, status), Runs: staged})
	if err != nil && p.finishLanded(ctx, staged) {
		// The finish was written although it answered an error: a
		// COMMIT whose reply the connection lost, or a group that was
		// committed so, then retried delivery by delivery (ErrConflict).
		// The runs are this node's: left unreleased, their jobs would
		// wait for the next start's recovery.
		p.log.Warn("ingest: delivery finish answered an error but its runs are stored; releasing them", "deliveryId", deliveryID, "error", err)
		err = nil
	}
	if errors.Is(err, store.ErrConflict) {
		// Finished already: by another node (this node's claim ran out
		// meanwhile), whose runs stand, the staged ones not written; or,
		// for a delivery that started no run, by this node's own write
		// whose reply was lost (nothing to release either way).
		p.unclaim(deliveryID)
		p.log.Warn("ingest: delivery already finished, by another node or by a write of this node whose reply was lost; its runs stand", "deliveryId", deliveryID)
		return nil
	}
	if err != nil {
		if len(staged) == len(tr.Runs) {
			p.unclaim(deliveryID)
		}
		return fmt.Errorf("ingest: finish delivery %s: %w", deliveryID, err)
	}
	p.unclaim(deliveryID)
	p.release(context.WithoutCancel(ctx), deliveryID, staged)
	p.observeOutcome(status, len(tr.Runs))
	p.log.Info("ingest: delivery processed", "deliveryId", deliveryID, "status", status,
		"summary", tr.Summary, "runs", len(tr.Runs))
	return nil
}

// finishLanded reports whether the staged runs of a finish that answered
// an error are in the store all the same. Run ids are new UUIDs, so only
// this finish can have stored them; a finish stores its runs with the
// delivery's outcome or nothing. A lookup that fails reads as not stored,
// as before.
func (p *Processor) finishLanded(ctx context.Context, staged stagedRuns) bool {
	if len(staged) == 0 {
		return false
	}
	// Bounded: the lookup comes right after the database failed to answer.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	run, err := p.st.GetRun(ctx, staged[0].Run.ID)
	return err == nil && run != nil
}

// handle computes the trace and creates runs. A non-nil error makes the
// delivery "failed".
//
// Runs are staged in b, not created: Process stores them with the
// delivery's outcome.
func (p *Processor) handle(ctx context.Context, d *store.Delivery, h *handed, b *stagedRuns) (*Trace, error) {
	xtr, src, err, ok := p.handleExtension(ctx, d, h, b)
	if ok {
		return xtr, err
	}
	tr := &Trace{Event: d.Event}
	if src.Provider != provider.Local {
		tr.Summary = fmt.Sprintf("provider %q: deliveries of this provider trigger no workflows", src.Provider)
		return tr, nil
	}
	if d.Event != "push" {
		tr.Summary = fmt.Sprintf("event %q is not handled for local sources", d.Event)
		return tr, nil
	}
	push, err := local.ParsePushPayload(d.Payload)
	if err != nil {
		return tr, err
	}
	tr.Ref, tr.SHA = push.Ref, push.After
	if push.Deleted() {
		tr.Summary = "ref " + push.Ref + " deleted; nothing to run"
		return tr, nil
	}
	// The registered path is authoritative; the payload's path is only
	// informational.
	if push.Repository.Path != "" && push.Repository.Path != src.LocalPath {
		p.log.Warn("ingest: payload repository path differs from the source's; using the source's",
			"deliveryId", d.ID, "sourceId", src.ID)
	}
	repo, err := p.localRepo(src.LocalPath)
	if err != nil {
		return tr, err
	}
	lf, err := p.localLock(ctx, src, repo, push.After, tr)
	if err != nil {
		return tr, err
	}
	if lf == nil {
		// A repository without a lock still gets its org's
		// organization-wide workflows.
		if !p.orgWideEnabled(ctx) {
			return tr, nil
		}
		lf = &lockfile.LockFile{}
	}

	repoIdent := push.Repository.FullName
	if repoIdent == "" {
		repoIdent = src.OrgID + "/" + src.Name
	}
	var files []string
	if trigger.NeedsChangedFiles(lf) {
		files, err = repo.ChangedFiles(ctx, push.Before, push.After)
		if err != nil {
			return tr, err
		}
		tr.ChangedFiles = files[:min(len(files), maxTracedFiles)]
	}
	ev := local.PushEvent(push, repoIdent, files)
	p.withLocalGates(ctx, repo, push.After, ev)
	p.registerLocal(ctx, src, repoIdent, push.Ref, push.After, lf)

	rc := RunContext{DeliveryID: d.ID, Source: src, RepoIdentifier: repoIdent,
		RepoURL: "file://" + repo.Path(), Ref: push.Ref, SHA: push.After, TriggeredBy: push.Sender.Login}
	matched, err := p.matchWorkflows(ctx, d, tr, lf.Workflows, ev, func(*lockfile.Workflow) RunContext { return rc }, b)
	if err != nil {
		return tr, err
	}
	if err := p.matchOrgWide(ctx, d, tr, src, ev, rc, b); err != nil && len(tr.Errors) == 0 {
		tr.Errors = append(tr.Errors, err.Error())
	}
	tr.Summary = fmt.Sprintf("%d of %d workflows matched; %d runs created", matched, len(lf.Workflows), len(tr.Runs))
	if len(lf.Workflows) == 0 && len(tr.Workflows) == 0 {
		tr.Summary = "lock file has no workflows"
		if tr.LockStatus == LockMissing {
			tr.Summary = "no lock file at " + push.After
		}
	} else if len(tr.Workflows) > len(lf.Workflows) {
		tr.Summary += fmt.Sprintf(" (%d organization-wide workflows of other sources considered)", len(tr.Workflows)-len(lf.Workflows))
	}
	if len(tr.Errors) > 0 {
		return tr, errors.New(strings.Join(tr.Errors, "; "))
	}
	return tr, nil
}
