package webhook

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"kici.dev/kici/internal/store"
)

// Defaults of the ingress, KiCI's values (see docs/kici-compatibility.md#ingress).
const (
	// DefaultMaxGitHubPayloadBytes is the GitHub route's body cap (25 MiB,
	// KICI_MAX_GITHUB_PAYLOAD_BYTES).
	DefaultMaxGitHubPayloadBytes = 25 << 20
	// DefaultSourceMaxPayloadBytes is a generic source's own body cap when
	// its settings set none (KiCI max_payload_bytes default, 1 MiB).
	DefaultSourceMaxPayloadBytes = 1 << 20
	// DefaultRateLimitRPM is a source's request budget per minute when its
	// settings set none (KiCI rate_limit_rpm default).
	DefaultRateLimitRPM = 600
	// DefaultEventLogMaxPayloadBytes is the largest body kept (gzipped) in
	// the event log; larger payloads are recorded as omitted
	// (KICI_EVENT_LOG_MAX_PAYLOAD_BYTES, 5 MiB).
	DefaultEventLogMaxPayloadBytes = 5 << 20
	// RejectedRecordsRPM caps the rejected-delivery records written per
	// source and minute (the store keeps the newest 1000 per source).
	RejectedRecordsRPM = 120
)

// Options configure an Ingress. Zero values select the defaults above.
type Options struct {
	// MaxGitHubPayloadBytes caps GitHub route bodies (413 above it).
	MaxGitHubPayloadBytes int64
	// GitHubPayloadCap, when set, returns the live cap per request (the
	// cluster setting max_github_payload_bytes); values ≤ 0 fall back to
	// MaxGitHubPayloadBytes.
	GitHubPayloadCap func(ctx context.Context) int64
	// EventLogMaxPayloadBytes caps the payload kept in the event log.
	EventLogMaxPayloadBytes int64
	// DedupTTL, when set, returns the dedup window live, read per replay
	// (the cluster setting webhook_dedup_ttl_ms, KiCI); nil or a value ≤ 0
	// means DefaultWebhookDedupTTL. See dedup.go.
	DedupTTL func(ctx context.Context) time.Duration
	// Logger receives ingress logs (never secrets or bodies); nil discards.
	Logger *slog.Logger
	// Now is the clock (tests); nil = time.Now.
	Now func() time.Time
}

// Submitter takes each newly accepted delivery for asynchronous
// processing (ingest.Processor); SubmitDelivery must not block. It gets
// the row just stored, so the processor schedules it without reading it
// back (one round trip less per delivery).
type Submitter interface {
	// SubmitDelivery queues the persisted delivery d.
	SubmitDelivery(d *store.Delivery)
}

// Accepter is a Submitter that processes on this node the deliveries it
// is given (ingest.Processor). The ingress lets it claim each delivery in
// the row that stores it (ClaimOnAccept fills Delivery.ClaimedBy before
// AcceptDelivery), then hands it the stored row with the source it was
// accepted for (SubmitAccepted, instead of SubmitDelivery): processing
// then reads neither the claim nor the source from the store, two round
// trips less per delivery.
type Accepter interface {
	Submitter
	// ClaimOnAccept sets d's claim for the insert; it must not block.
	ClaimOnAccept(d *store.Delivery)
	// SubmitAccepted queues the persisted delivery d, accepted for src
	// (its settings as read by the ingress, never nil); it must not block.
	SubmitAccepted(d *store.Delivery, src *store.Source, set *store.SourceSettings)
}

// SubmitFunc is a function as a Submitter.
type SubmitFunc func(d *store.Delivery)

// SubmitDelivery calls f.
func (f SubmitFunc) SubmitDelivery(d *store.Delivery) { f(d) }

// Ingress serves the webhook routes. Every accepted delivery is persisted,
// with its event-log entry, in one transaction before the 2xx answer, then
// its id is handed to its Submitter (the pipeline) for asynchronous processing.
// A replay of a delivery id within the dedup window (Options.DedupTTL)
// answers 200 duplicate and creates nothing but a duplicate event-log
// entry; after the window it is accepted as a new delivery (dedup.go). A refused request after its source is known
// leaves only a rejected-delivery record.
type Ingress struct {
	st      store.Store
	submit  Submitter
	log     *slog.Logger
	opts    Options
	limiter *RateLimiter
}

// NewIngress returns the ingress over st; submit takes each newly accepted
// delivery id (nil: none is submitted).
func NewIngress(st store.Store, submit Submitter, opts Options) *Ingress {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = func() time.Time { return time.Now().UTC() }
	}
	if opts.MaxGitHubPayloadBytes <= 0 {
		opts.MaxGitHubPayloadBytes = DefaultMaxGitHubPayloadBytes
	}
	if opts.EventLogMaxPayloadBytes <= 0 {
		opts.EventLogMaxPayloadBytes = DefaultEventLogMaxPayloadBytes
	}
	if submit == nil {
		submit = SubmitFunc(func(*store.Delivery) {})
	}
	return &Ingress{st: st, submit: submit, log: opts.Logger, opts: opts, limiter: NewRateLimiter(opts.Now)}
}

// RateLimiter is a per-key token bucket: a key with a budget of rpm
// requests per minute holds at most rpm tokens and regains rpm/60 per
// second. It is per process (each orchestrator enforces its own budget).
type RateLimiter struct {
	mu      sync.Mutex
	now     func() time.Time
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	rpm    int
	last   time.Time
}

// NewRateLimiter returns an empty limiter on the clock now.
func NewRateLimiter(now func() time.Time) *RateLimiter {
	return &RateLimiter{now: now, buckets: map[string]*bucket{}}
}

// Allow takes one token for key under a budget of rpm per minute. When none
// is left it reports false and how long until one is (≥ 1 s, whole
// seconds). rpm < 0 means unlimited; 0 means DefaultRateLimitRPM.
func (l *RateLimiter) Allow(key string, rpm int) (bool, time.Duration) {
	if rpm < 0 {
		return true, 0
	}
	if rpm == 0 {
		rpm = DefaultRateLimitRPM
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.buckets[key]
	if b == nil || b.rpm != rpm {
		b = &bucket{tokens: float64(rpm), rpm: rpm, last: now}
		l.buckets[key] = b
	}
	perSec := float64(rpm) / 60
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = math.Min(float64(rpm), b.tokens+el*perSec)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := math.Ceil((1 - b.tokens) / perSec)
	return false, time.Duration(math.Max(1, wait)) * time.Second
}

// activeSecrets returns the secrets a delivery of src may be signed with,
// given all its secrets (revoked ones included, as the look-up read
// them): the unrevoked rotation secrets when it has any, else its
// original webhook secret.
func activeSecrets(src *store.Source, all []*store.SourceSecret) []string {
	if len(all) == 0 {
		if src.WebhookSecret == "" {
			return nil
		}
		return []string{src.WebhookSecret}
	}
	var out []string
	for _, s := range all {
		if s.RevokedAt == nil && s.Secret != "" {
			out = append(out, s.Secret)
		}
	}
	return out
}

// VerifyHMAC reports whether header ("sha256=<hex>") is the HMAC-SHA256 of
// body under any of secrets. Every secret is tried (no early exit on the
// first match), each comparison in constant time, so the answer time does
// not reveal which secret matched or how much of the signature was right.
func VerifyHMAC(header string, body []byte, secrets []string) bool {
	hexSig, ok := strings.CutPrefix(strings.TrimSpace(header), "sha256=")
	if !ok || len(hexSig) != sha256.Size*2 {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return false
	}
	match := false
	for _, s := range secrets {
		mac := hmac.New(sha256.New, []byte(s))
		mac.Write(body)
		if hmac.Equal(got, mac.Sum(nil)) {
			match = true
		}
	}
	return match
}

// clientIP is the request's peer address without port. Forwarding headers
// are not trusted: behind a proxy, the proxy's address is what is checked.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// readCapped reads at most limit bytes of the body; tooBig reports a body
// over the cap (Content-Length or actual size).
func readCapped(w http.ResponseWriter, r *http.Request, limit int64) (body []byte, tooBig bool, err error) {
	if r.ContentLength > limit {
		return nil, true, nil
	}
	var buf bytes.Buffer
	_, err = buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, true, nil
		}
		return nil, false, err
	}
	return buf.Bytes(), false, nil
}

// reject answers status with msg and leaves a rejected-delivery record (the
// only trace of a refused request). Extra headers (Retry-After) are set by
// the caller before.
func (in *Ingress) reject(w http.ResponseWriter, r *http.Request, src *store.Source, route, deliveryHeader, event string,
	status int, msg string, body []byte, size int64) {
	rec := &store.RejectedDelivery{SourceID: src.ID, OrgID: src.OrgID, Route: route, DeliveryHeader: truncate(deliveryHeader, MaxRawDeliveryIDLen),
		Event: truncate(event, 100), StatusCode: status, Reason: msg, RemoteAddr: clientIP(r), PayloadSizeBytes: size, ReceivedAt: in.opts.Now()}
	if body != nil {
		sum := sha256.Sum256(body)
		rec.PayloadHash = hex.EncodeToString(sum[:])
	}
	// Records are themselves rate limited per source, so a flood of forged
	// requests costs at most RejectedRecordsRPM writes a minute.
	if ok, _ := in.limiter.Allow("rejected:"+src.ID, RejectedRecordsRPM); ok {
		if err := in.st.RecordRejected(context.WithoutCancel(r.Context()), rec); err != nil {
			in.log.Error("webhook: record rejected delivery", "sourceId", src.ID, "error", err)
		}
	}
	in.log.Warn("webhook: delivery rejected", "route", route, "sourceId", src.ID, "status", status, "reason", msg, "remote", rec.RemoteAddr)
	fail(w, status, msg)
}

// MsgSourceDisabled is the answer (404, as KiCI answers for a disabled
// source) to a delivery for a paused source. It differs from "source not
// found" so that a sender's delivery log tells the operator the source
// exists but was disabled (kici-admin source enable <id> resumes it).
const MsgSourceDisabled = "source is disabled"

// refuseDisabled answers a delivery for a disabled source 404
// MsgSourceDisabled without reading its body, and leaves a
// rejected-delivery record (body size from Content-Length, no hash), so an
// operator can see what a paused source refused and ask the sender to
// redeliver after enabling it.
func (in *Ingress) refuseDisabled(w http.ResponseWriter, r *http.Request, src *store.Source, route, deliveryHeader, event string) {
	in.reject(w, r, src, route, strings.TrimSpace(deliveryHeader), strings.TrimSpace(event), http.StatusNotFound, MsgSourceDisabled, nil, max(r.ContentLength, 0))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// logEntry builds the event-log entry of an accepted delivery, with the
// payload gzipped (or omitted when over the event-log cap).
func (in *Ingress) logEntry(src *store.Source, event, action, repo, ref string, body []byte) *store.EventLogEntry {
	sum := sha256.Sum256(body)
	e := &store.EventLogEntry{OrgID: src.OrgID, SourceID: src.ID, RoutingKey: src.RoutingKey, Event: event, Action: action,
		Source: "direct", Provider: src.Provider, RepoIdentifier: repo, Ref: ref,
		PayloadSizeBytes: int64(len(body)), PayloadHash: hex.EncodeToString(sum[:])}
	if int64(len(body)) > in.opts.EventLogMaxPayloadBytes {
		e.PayloadOmittedReason = "payload exceeds the event-log cap of " + strconv.FormatInt(in.opts.EventLogMaxPayloadBytes, 10) + " bytes"
		return e
	}
	e.PayloadGz = gzipPayload(body)
	return e
}

// gzipWriters reuses gzip compressors: each holds several hundred KB of
// state, which allocating per delivery made a visible share of the accept
// path's CPU and garbage.
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return zw
}}

// gzipPayload returns body gzipped at the fastest level (payloads are
// small JSON documents kept for inspection, not archival).
func gzipPayload(body []byte) []byte {
	var buf bytes.Buffer
	zw := gzipWriters.Get().(*gzip.Writer)
	zw.Reset(&buf)
	_, _ = zw.Write(body)
	_ = zw.Close()
	gzipWriters.Put(zw)
	return buf.Bytes()
}

// accept persists the delivery and its event-log entry and answers 202, or
// 200 duplicate (recording the replay), or 500 when the store fails (the
// sender retries; nothing was half-written).
func (in *Ingress) accept(w http.ResponseWriter, r *http.Request, d *store.Delivery, e *store.EventLogEntry, src *store.Source, set *store.SourceSettings) {
	ctx := context.WithoutCancel(r.Context())
	accepter, claims := in.submit.(Accepter)
	if claims {
		accepter.ClaimOnAccept(d)
	}
	err := in.acceptWindowed(ctx, d, e)
	if errors.Is(err, store.ErrConflict) {
		dup := *e
		dup.ID, dup.PayloadGz, dup.PayloadOmittedReason, dup.ReceivedAt = "", nil, "duplicate", in.opts.Now()
		dup.DeliveryID = d.ID
		if err := in.st.RecordDuplicate(ctx, &dup); err != nil {
			in.log.Error("webhook: record duplicate", "deliveryId", d.ID, "error", err)
		}
		in.log.Info("webhook: duplicate delivery", "deliveryId", d.ID, "sourceId", d.SourceID)
		writeJSON(w, http.StatusOK, Response{Accepted: true, Duplicate: true, DeliveryID: d.ID})
		return
	}
	if err != nil {
		in.log.Error("webhook: persist delivery failed", "deliveryId", d.ID, "error", err)
		fail(w, http.StatusInternalServerError, "could not persist delivery")
		return
	}
	in.log.Info("webhook: delivery accepted", "deliveryId", d.ID, "sourceId", d.SourceID, "event", d.Event, "bytes", len(d.Payload))
	if claims {
		accepter.SubmitAccepted(d, src, set)
	} else {
		in.submit.SubmitDelivery(d)
	}
	writeJSON(w, http.StatusAccepted, Response{Accepted: true, DeliveryID: d.ID})
}
