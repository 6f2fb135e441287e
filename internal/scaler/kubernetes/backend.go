package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"kici.dev/kici/internal/scaler"
)

// Options configure kubernetes backends.
type Options struct {
	// StopGrace is the grace period of a pod deletion (default 10 s, the
	// container backend's stop grace).
	StopGrace time.Duration
	// Logger logs spawns, exits and orphan removals.
	Logger *slog.Logger
	// Client, if set, is used instead of a client built from the entry
	// (kubeconfig, in-cluster config, $KUBECONFIG).
	Client API
}

// With returns a factory building kubernetes backends for entries of type
// kubernetes and handing every other entry to next.
func With(next scaler.BackendFactory, o Options) scaler.BackendFactory {
	return func(e *scaler.Entry, exited func(agentID string, err error)) (scaler.Backend, error) {
		if e.Type != scaler.TypeKubernetes {
			return next(e, exited)
		}
		return New(e, o, exited)
	}
}

// Backend runs each agent in a pod of its own (one pod per job) in one
// namespace. Pods and their token Secrets carry the labels kici-managed,
// kici-scaler-name, kici-agent-id (and kici-bound-job-id, kici-run-id);
// an informer on those labels follows them. Pods of this scaler that it
// does not track are deleted at construction (orchestrator start, reload)
// and reported by LostAtStart.
type Backend struct {
	name   string
	ns     string
	cs     API
	opts   Options
	exited func(agentID string, err error)
	log    *slog.Logger
	stop   chan struct{}

	mu     sync.Mutex
	pods   map[string]*podRec // by agent id
	closed bool
	reaped []string // agent ids of orphans removed, until LostAtStart
}

// podRec is one agent's pod as the backend tracks it.
type podRec struct {
	name, secret, main string
	emit               func(scaler.EventType, string)
	updates            chan struct{} // a new status (capacity 1)
	done               chan struct{} // closed once the end is reported

	// Guarded by Backend.mu.
	latest        *corev1.Pod
	deleted       bool
	spawned       bool // Spawn returned success: ends go to exited
	finishing     bool
	destroyReason string
}

// Compile-time checks of the optional scaler interfaces.
var (
	_ scaler.ReasonedDestroyer = (*Backend)(nil)
	_ scaler.SandboxPerAgent   = (*Backend)(nil)
)

// New connects to the cluster of entry e (its kubeconfig; else the
// in-cluster service account; else $KUBECONFIG), deletes this scaler's
// orphaned pods and Secrets, and starts following its pods. Errors: no
// usable configuration, the API server unreachable or refusing to list
// pods in the namespace (RBAC, docs/kubernetes.md).
func New(e *scaler.Entry, o Options, exited func(agentID string, err error)) (*Backend, error) {
	if o.StopGrace <= 0 {
		o.StopGrace = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	} else {
		// client-go logs through klog (to stderr by default): its lines
		// (throttling, watch restarts) join the orchestrator's log.
		klog.SetSlogLogger(o.Logger.With("component", "client-go"))
	}
	cs := o.Client
	if cs == nil {
		cfg, err := restConfig(e.Kubeconfig)
		if err != nil {
			return nil, err
		}
		if cs, err = newAPI(cfg); err != nil {
			return nil, err
		}
	}
	b := &Backend{name: e.Name, ns: namespace(e.Namespace), cs: cs, opts: o, exited: exited,
		log: o.Logger.With("scaler", e.Name), stop: make(chan struct{}), pods: map[string]*podRec{}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if n, err := b.ReapOrphans(ctx); err != nil {
		return nil, fmt.Errorf("kubernetes namespace %s: %w", b.ns, err)
	} else if n > 0 {
		b.log.Info("deleted orphaned agent pods", "count", n, "namespace", b.ns)
	}
	if err := b.follow(ctx); err != nil {
		close(b.stop)
		return nil, err
	}
	return b, nil
}

// selector selects this scaler's pods and Secrets.
func (b *Backend) selector() string {
	return scaler.LabelManaged + "=true," + scaler.LabelScalerName + "=" + LabelValue(b.name)
}

// follow starts the pod informer of this scaler's pods and waits for its
// first list.
func (b *Backend) follow(ctx context.Context) error {
	pods := b.cs.Pods(b.ns)
	// The reflector streams its first list (watch-list) unless the client
	// says it cannot (client-go's in-memory fake, in tests).
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = b.selector()
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = b.selector()
			return pods.Watch(ctx, o)
		},
	}, b.cs), &corev1.Pod{}, 0, cache.Indexers{})
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { b.onPod(obj, false) },
		UpdateFunc: func(_, obj any) { b.onPod(obj, false) },
		DeleteFunc: func(obj any) { b.onPod(obj, true) },
	}); err != nil {
		return err
	}
	go inf.Run(b.stop)
	synced := make(chan bool, 1)
	go func() { synced <- cache.WaitForCacheSync(b.stop, inf.HasSynced) }()
	select {
	case ok := <-synced:
		if !ok {
			return errors.New("pod watch stopped before its first list")
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("watch pods in namespace %s: %w", b.ns, ctx.Err())
	}
}

// onPod records a pod event of a tracked agent: before the spawn returned
// it wakes Spawn; after, an ended or deleted pod is finished.
func (b *Backend) onPod(obj any, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	id := pod.Annotations[AnnotationAgentID]
	b.mu.Lock()
	rec := b.pods[id]
	if rec == nil || rec.name != pod.Name {
		b.mu.Unlock()
		return
	}
	rec.latest = pod
	rec.deleted = rec.deleted || deleted
	spawned := rec.spawned
	b.mu.Unlock()
	if !spawned {
		select {
		case rec.updates <- struct{}{}:
		default:
		}
		return
	}
	st := stateOf(pod, rec.main)
	switch {
	case deleted:
		go b.finish(id, rec, nil)
	case st.ended:
		go b.finish(id, rec, st.err)
	}
}

// Spawn creates the agent's token Secret and pod and returns once the
// pod's agent (or job) container runs. While the pod waits it shows why
// (unschedulable, pulling an image that fails) on the job's provisioning
// log and as its pending reason; a pod that cannot start (an image that
// cannot be pulled, an invalid spec, a quota refusing it) fails the spawn
// with that reason. On any failure the pod and Secret are deleted.
func (b *Backend) Spawn(ctx context.Context, req *scaler.SpawnRequest) error {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return errors.New("backend is shutting down")
	}
	if err := checkReach(req.OrchestratorURL); err != nil {
		return err
	}
	pending := req.Pending
	if pending == nil {
		pending = func(string) {}
	}
	pod, secret, err := BuildPod(req, PodParams{Namespace: b.ns, ScalerName: b.name, StopGrace: b.opts.StopGrace})
	if err != nil {
		return err
	}
	rec := &podRec{name: pod.Name, secret: secret.Name, main: pod.Spec.Containers[0].Name, emit: req.Emit,
		updates: make(chan struct{}, 1), done: make(chan struct{})}
	b.mu.Lock()
	if b.pods[req.AgentID] != nil {
		b.mu.Unlock()
		return fmt.Errorf("agent %s already has a pod", req.AgentID)
	}
	// Tracked before the create so the orphan sweep never takes it.
	b.pods[req.AgentID] = rec
	b.mu.Unlock()
	undo := func(err error) error {
		b.mu.Lock()
		delete(b.pods, req.AgentID)
		b.mu.Unlock()
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b.deleteObjects(dctx, rec, 0)
		return err
	}
	if _, err := b.cs.Secrets(b.ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return undo(createError("the agent token Secret", err, pending))
	}
	created, err := b.cs.Pods(b.ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return undo(createError("the agent pod", err, pending))
	}
	b.ownSecret(ctx, created, secret.Name)
	req.Emit(scaler.EventProvisioning, fmt.Sprintf("pod %s/%s created (%s from %s)", b.ns, created.Name, rec.main, created.Spec.Containers[0].Image))
	shown := ""
	tick := time.NewTicker(eventPoll)
	defer tick.Stop()
	for {
		b.mu.Lock()
		latest, deleted := rec.latest, rec.deleted
		b.mu.Unlock()
		if deleted {
			return undo(fmt.Errorf("pod %s was deleted before its agent started", created.Name))
		}
		if latest != nil && latest.UID == created.UID {
			st := stateOf(latest, rec.main)
			switch {
			case st.running:
				return b.started(req, rec, created)
			case st.ended:
				return undo(fmt.Errorf("pod %s ended before its agent started: %v", created.Name, orClean(st.err)))
			case st.fatal != "":
				req.Emit(scaler.EventProvisioning, "pod "+created.Name+" cannot start: "+st.fatal)
				return undo(fmt.Errorf("pod cannot start: %s", st.fatal))
			case st.pending != "" && st.pending != shown:
				shown = st.pending
				req.Emit(scaler.EventProvisioning, "pod "+created.Name+" waits: "+shown)
				pending(shown)
			}
		}
		select {
		case <-rec.updates:
		case <-tick.C:
			// Some failures show only as events (a sandbox the runtime
			// cannot create, a volume that cannot mount), not in the
			// pod's status.
			if w := b.lastWarning(ctx, created); w != "" && w != shown {
				shown = w
				req.Emit(scaler.EventProvisioning, "pod "+created.Name+" waits: "+shown)
				pending(shown)
			}
		case <-ctx.Done():
			if shown != "" {
				return undo(fmt.Errorf("%w; the pod still waited: %s", ctx.Err(), shown))
			}
			return undo(ctx.Err())
		}
	}
}

// eventPoll is how often a waiting spawn looks at its pod's events.
const eventPoll = 5 * time.Second

// lastWarning is the newest Warning event of pod other than the
// scheduler's (the Unschedulable condition says that), as "event
// <reason>: <message>"; "" when there is none or events may not be read
// (the optional events: list permission, docs/kubernetes.md).
func (b *Backend) lastWarning(ctx context.Context, pod *corev1.Pod) string {
	evs, err := b.cs.Events(b.ns).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + pod.Name + ",involvedObject.uid=" + string(pod.UID) + ",type=Warning"})
	if err != nil {
		return ""
	}
	var last *corev1.Event
	for i := range evs.Items {
		e := &evs.Items[i]
		if e.Reason == "FailedScheduling" {
			continue
		}
		if last == nil || e.LastTimestamp.After(last.LastTimestamp.Time) {
			last = e
		}
	}
	if last == nil {
		return ""
	}
	return "event " + last.Reason + ": " + oneLine(last.Message)
}

// started marks rec spawned; a pod that ended between the last status
// and now fails the spawn instead (its exit would reach no one).
func (b *Backend) started(req *scaler.SpawnRequest, rec *podRec, pod *corev1.Pod) error {
	b.mu.Lock()
	rec.spawned = true
	gone := rec.deleted || (rec.latest != nil && stateOf(rec.latest, rec.main).ended)
	if gone {
		rec.spawned = false
	}
	b.mu.Unlock()
	if gone {
		b.mu.Lock()
		delete(b.pods, req.AgentID)
		b.mu.Unlock()
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b.deleteObjects(dctx, rec, 0)
		return fmt.Errorf("pod %s ended as its agent started", pod.Name)
	}
	node := ""
	if rec.latest != nil {
		node = rec.latest.Spec.NodeName
	}
	req.Emit(scaler.EventProvisioning, fmt.Sprintf("pod %s running on node %s", pod.Name, node))
	b.log.Info("agent pod running", "agent", req.AgentID, "job", req.JobID, "pod", pod.Name, "node", node)
	return nil
}

// finish reports an agent's end once: it deletes the pod (if still there)
// and its Secret, says why on the job's log, forgets the agent and calls
// the exit callback.
func (b *Backend) finish(id string, rec *podRec, exitErr error) {
	b.mu.Lock()
	if rec.finishing || b.pods[id] != rec {
		b.mu.Unlock()
		return
	}
	rec.finishing = true
	reason, deleted := rec.destroyReason, rec.deleted
	b.mu.Unlock()
	switch {
	case reason != "":
		exitErr = fmt.Errorf("pod deleted: %s", reason)
	case deleted:
		// Deleted by someone else (kubectl, an eviction, a node drain).
		reason = "agent lost: the pod was deleted outside kici"
		exitErr = errors.New(reason)
	case exitErr != nil:
		reason = "agent lost: " + exitErr.Error()
	default:
		reason = "job finished: the agent exited"
	}
	dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	b.deleteObjects(dctx, rec, b.opts.StopGrace)
	cancel()
	rec.emit(scaler.EventDestroyed, fmt.Sprintf("pod %s deleted: %s", rec.name, reason))
	b.mu.Lock()
	delete(b.pods, id)
	b.mu.Unlock()
	b.log.Info("agent pod ended", "agent", id, "pod", rec.name, "reason", reason)
	if b.exited != nil {
		b.exited(id, exitErr)
	}
	close(rec.done) // after the report: Destroy returns with the exit known
}

// deleteObjects deletes rec's pod (grace; 0 = at once) and its Secret;
// ones already gone are fine.
func (b *Backend) deleteObjects(ctx context.Context, rec *podRec, grace time.Duration) {
	secs := int64(grace / time.Second)
	if err := b.cs.Pods(b.ns).Delete(ctx, rec.name, metav1.DeleteOptions{GracePeriodSeconds: &secs}); err != nil && !apierrors.IsNotFound(err) {
		b.log.Warn("delete agent pod", "pod", rec.name, "err", err)
	}
	if err := b.cs.Secrets(b.ns).Delete(ctx, rec.secret, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		b.log.Warn("delete agent token secret", "secret", rec.secret, "err", err)
	}
}

// ownSecret makes the pod the owner of its token Secret, so that the
// cluster's garbage collector deletes the Secret with the pod even when
// this process never gets to (a failure here is logged: the orphan sweep
// deletes it at the next start).
func (b *Backend) ownSecret(ctx context.Context, pod *corev1.Pod, secret string) {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}}})
	if _, err := b.cs.Secrets(b.ns).Patch(ctx, secret, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		b.log.Warn("own the agent token secret by its pod", "secret", secret, "err", err)
	}
}

// Destroy deletes the agent's pod (grace StopGrace) and Secret and waits
// (bounded by ctx) until the end is reported.
func (b *Backend) Destroy(ctx context.Context, id string) error {
	return b.DestroyFor(ctx, id, "stopped by the orchestrator")
}

// DestroyFor is Destroy recording reason on the job's log and in the
// agent's exit error (scaler.ReasonedDestroyer).
func (b *Backend) DestroyFor(ctx context.Context, id, reason string) error {
	b.mu.Lock()
	rec := b.pods[id]
	if rec == nil {
		b.mu.Unlock()
		return nil
	}
	if rec.destroyReason == "" {
		rec.destroyReason = reason
	}
	spawned := rec.spawned
	b.mu.Unlock()
	if !spawned {
		return nil // Spawn still owns it and deletes it on failure
	}
	rec.emit(scaler.EventProvisioning, fmt.Sprintf("deleting pod %s (grace %s): %s", rec.name, b.opts.StopGrace, reason))
	secs := int64(b.opts.StopGrace / time.Second)
	err := b.cs.Pods(b.ns).Delete(ctx, rec.name, metav1.DeleteOptions{GracePeriodSeconds: &secs})
	if apierrors.IsNotFound(err) {
		go b.finish(id, rec, nil)
	} else if err != nil {
		return fmt.Errorf("delete pod %s: %w", rec.name, err)
	}
	return scalerWait(ctx, rec.done)
}

func scalerWait(ctx context.Context, done <-chan struct{}) error {
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown refuses further spawns, deletes every agent pod (bounded by
// ctx) and stops following pods.
func (b *Backend) Shutdown(ctx context.Context) {
	b.mu.Lock()
	b.closed = true
	var ids []string
	for id := range b.pods {
		ids = append(ids, id)
	}
	b.mu.Unlock()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() { _ = b.DestroyFor(ctx, id, "the orchestrator is shutting down") })
	}
	wg.Wait()
	select {
	case <-b.stop:
	default:
		close(b.stop)
	}
}

// ReapOrphans deletes the pods and token Secrets of this scaler that it
// does not track (left by a stopped or killed orchestrator) and returns
// how many pods it deleted; their agents are reported by LostAtStart.
func (b *Backend) ReapOrphans(ctx context.Context) (int, error) {
	sel := metav1.ListOptions{LabelSelector: b.selector()}
	pods, err := b.cs.Pods(b.ns).List(ctx, sel)
	if err != nil {
		return 0, fmt.Errorf("list pods: %w", err)
	}
	tracked := func(name string) bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, r := range b.pods {
			if r.name == name || r.secret == name {
				return true
			}
		}
		return false
	}
	n := 0
	zero := int64(0)
	for _, p := range pods.Items {
		if tracked(p.Name) {
			continue
		}
		if err := b.cs.Pods(b.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			return n, fmt.Errorf("delete orphan pod %s: %w", p.Name, err)
		}
		b.log.Info("deleted orphaned agent pod", "pod", p.Name, "agent", p.Annotations[AnnotationAgentID])
		if id := p.Annotations[AnnotationAgentID]; id != "" {
			b.mu.Lock()
			b.reaped = append(b.reaped, id)
			b.mu.Unlock()
		}
		n++
	}
	secrets, err := b.cs.Secrets(b.ns).List(ctx, sel)
	if err != nil {
		return n, fmt.Errorf("list secrets: %w", err)
	}
	for _, s := range secrets.Items {
		if tracked(s.Name) {
			continue
		}
		if err := b.cs.Secrets(b.ns).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return n, fmt.Errorf("delete orphan secret %s: %w", s.Name, err)
		}
	}
	return n, nil
}

// LostAtStart reports the agents whose pods were deleted as orphans of a
// previous orchestrator process (each once).
func (b *Backend) LostAtStart() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	ids := b.reaped
	b.reaped = nil
	return ids
}

// SandboxEndsWithAgent marks the backend for scaler.SandboxPerAgent: a
// disconnected agent's pod is deleted if it does not end by itself.
func (*Backend) SandboxEndsWithAgent() {}

// Namespace is the namespace the backend's pods live in.
func (b *Backend) Namespace() string { return b.ns }

// createError words a refused create: a quota (403 Forbidden "exceeded
// quota") is shown as the job's pending reason before the spawn fails.
func createError(what string, err error, pending func(string)) error {
	if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota") {
		reason := "resource quota: " + oneLine(err.Error())
		pending(reason)
		return fmt.Errorf("create %s: %s", what, reason)
	}
	return fmt.Errorf("create %s: %w", what, err)
}

// checkReach refuses a loopback orchestrator URL: inside a pod that is
// the pod itself.
func checkReach(raw string) error {
	first, _, _ := strings.Cut(raw, ",")
	u, err := url.Parse(first)
	if err != nil {
		return fmt.Errorf("orchestrator URL %q: %w", first, err)
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); (ip != nil && (ip.IsLoopback() || ip.IsUnspecified())) || host == "localhost" {
		return fmt.Errorf("agents would dial %s, which inside a pod is the pod itself: set orchestratorUrl for the scaler (e.g. ws://<orchestrator service>:4000/ws)", first)
	}
	return nil
}

func orClean(err error) error {
	if err == nil {
		return errors.New("exited 0")
	}
	return err
}
