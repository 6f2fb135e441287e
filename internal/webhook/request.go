package webhook

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"kici.dev/kici/internal/store"
)

// route is what a webhook route's rejected-delivery records call it and
// the headers that name a delivery and its event before anything else is
// read (a disabled source's record keeps them).
type route struct {
	name           string
	deliveryHeader string
	eventHeader    string
}

var (
	genericRoute = route{name: "generic", deliveryHeader: HeaderDelivery, eventHeader: HeaderEventType}
	githubRoute  = route{name: "github", deliveryHeader: HeaderGitHubDelivery, eventHeader: HeaderGitHubEvent}
)

// request is one delivery on its way through the steps every route takes
// once its source is known. rawID and event are the client's delivery id
// and event name as read so far: a route may refine them (forge headers,
// an idempotency key), and every rejection records their current value.
type request struct {
	in  *Ingress
	w   http.ResponseWriter
	r   *http.Request
	src *store.Source
	// set is the source's settings (zero settings when it has none).
	set *store.SourceSettings
	// secrets are all the source's webhook secrets, revoked ones
	// included; secretsErr is why they could not be read.
	secrets    []*store.SourceSecret
	secretsErr error
	route      string
	rawID      string
	event      string
	// body is nil until readBody succeeds.
	body []byte
}

// postOnly answers 405 to anything but POST; it reports whether the
// request may go on.
func postOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodPost {
		return true
	}
	w.Header().Set("Allow", http.MethodPost)
	fail(w, http.StatusMethodNotAllowed, "method not allowed")
	return false
}

// admit takes the outcome of a route's source look-up (the source with
// its settings and secrets, read in one statement): store.ErrNotFound
// (the route maps a source it does not serve to it too) answers 404
// "source not found", any other error 500 (logged with logArgs, which name
// what was looked up), and a disabled source 404 MsgSourceDisabled with a
// rejected-delivery record. It returns nil when it has answered.
func (in *Ingress) admit(w http.ResponseWriter, r *http.Request, rt route, is *store.IngressSource, err error, logArgs ...any) *request {
	if errors.Is(err, store.ErrNotFound) {
		fail(w, http.StatusNotFound, "source not found")
		return nil
	}
	if err != nil {
		in.log.Error("webhook: source lookup failed", append(logArgs, "error", err)...)
		fail(w, http.StatusInternalServerError, "internal error")
		return nil
	}
	src := is.Source
	if !src.Enabled {
		in.refuseDisabled(w, r, src, rt.name, r.Header.Get(rt.deliveryHeader), r.Header.Get(rt.eventHeader))
		return nil
	}
	set := is.Settings
	if set == nil {
		set = &store.SourceSettings{SourceID: src.ID}
	}
	return &request{in: in, w: w, r: r, src: src, set: set, secrets: is.Secrets, secretsErr: is.SecretsErr, route: rt.name,
		rawID: strings.TrimSpace(r.Header.Get(rt.deliveryHeader)), event: strings.TrimSpace(r.Header.Get(rt.eventHeader))}
}

// reject answers status with msg and leaves a rejected-delivery record
// with the body's size and hash when it has been read.
func (q *request) reject(status int, msg string) {
	q.in.reject(q.w, q.r, q.src, q.route, q.rawID, q.event, status, msg, q.body, int64(len(q.body)))
}

// internalError logs a store failure (what failed, never the body) and
// answers 500 without a rejected-delivery record: the sender retries and
// the delivery is not the sender's fault.
func (q *request) internalError(what string, err error) {
	q.in.log.Error("webhook: "+what+" failed", "sourceId", q.src.ID, "error", err)
	fail(q.w, http.StatusInternalServerError, "internal error")
}

// activeSecrets returns the secrets a delivery may be signed with (see
// activeSecrets), or the error that kept the look-up from reading them.
func (q *request) activeSecrets() ([]string, error) {
	if q.secretsErr != nil {
		return nil, q.secretsErr
	}
	return activeSecrets(q.src, q.secrets), nil
}

// readBody reads the body up to limit bytes. Over the cap it answers 413
// with a rejected-delivery record that has the announced size and no hash
// (the body was not read); an unreadable body answers 400. It reports
// whether the body was read.
func (q *request) readBody(limit int64) bool {
	body, tooBig, err := readCapped(q.w, q.r, limit)
	if tooBig {
		q.in.reject(q.w, q.r, q.src, q.route, q.rawID, q.event, http.StatusRequestEntityTooLarge,
			"payload too large (limit "+strconv.FormatInt(limit, 10)+" bytes)", nil, max(q.r.ContentLength, 0))
		return false
	}
	if err != nil {
		fail(q.w, http.StatusBadRequest, "could not read body")
		return false
	}
	q.body = body
	return true
}

// withinRateLimit takes one request of the source's budget of rpm per
// minute; when none is left it answers 429 with Retry-After and reports
// false.
func (q *request) withinRateLimit(rpm int) bool {
	ok, wait := q.in.limiter.Allow(q.src.ID, rpm)
	if !ok {
		q.w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())))
		q.reject(http.StatusTooManyRequests, "rate limit exceeded")
	}
	return ok
}

// payloadHead is what the event log keeps of a payload: the fields GitHub
// and most forges name the same way.
type payloadHead struct {
	Action     string `json:"action"`
	Ref        string `json:"ref"`
	Repository struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
}

// readHead returns the payload's head; a field of an unexpected type
// leaves the whole head empty, so the event log keeps none of them.
func readHead(body []byte) payloadHead {
	var head payloadHead
	if json.Unmarshal(body, &head) != nil {
		return payloadHead{}
	}
	return head
}

// accept persists the delivery "<routingKey>:<rawID>" with its event-log
// entry (action, repository and ref as given) and answers; see
// Ingress.accept.
func (q *request) accept(action, repo, ref string) {
	src := q.src
	d := &store.Delivery{ID: src.RoutingKey + ":" + q.rawID, SourceID: src.ID, OrgID: src.OrgID, Event: q.event,
		Payload: json.RawMessage(q.body), ReceivedAt: q.in.opts.Now()}
	q.in.accept(q.w, q.r, d, q.in.logEntry(src, q.event, truncate(action, 100), truncate(repo, 200), truncate(ref, 300), q.body), src, q.set)
}
