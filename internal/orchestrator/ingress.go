package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/api"
	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/ingest"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/scheduler"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/webhook"
)

// ServesGitHubIngress reports whether the direct GitHub route is served in
// mode: in hybrid, independent and observed, not in platform (relay only)
// — KiCI's shouldServeGithubIngress
// (see docs/kici-compatibility.md#ingress).
func ServesGitHubIngress(mode config.Mode) bool { return mode != config.ModePlatform }

// ingressWiring is the webhook ingress and event emission of one server.
type ingressWiring struct {
	sched   *scheduler.Scheduler
	mode    config.Mode
	in      *webhook.Ingress
	proc    *ingest.Processor
	webhook *slog.Logger
}

// setupIngress wires the webhook routes, the schedule-trigger scheduler
// and event emission. In observed mode it refuses to start while a
// GitHub-App source exists (those are relayed by KiCI's platform, which
// an observed orchestrator never accepts).
func setupIngress(ctx context.Context, cfg *config.Config, st store.Store, proc *ingest.Processor,
	settings *cluster.Reader, holder string, logger *slog.Logger) (*ingressWiring, error) {
	window, err := scheduler.CatchUpWindowFromEnv(os.Environ())
	if err != nil {
		return nil, err
	}
	if cfg.Mode == api.ModeObserved {
		srcs, err := st.ListSources(ctx, "")
		if err != nil {
			return nil, fmt.Errorf("list sources: %w", err)
		}
		for _, s := range srcs {
			if s.Provider == provider.GitHub && strings.HasPrefix(s.RoutingKey, webhook.GitHubRoutingKeyPrefix) &&
				!strings.HasPrefix(s.RoutingKey, "github:token:") {
				return nil, fmt.Errorf("KICI_MODE=observed: GitHub App source %q (%s) exists; an observed orchestrator does not ingest GitHub App sources (remove it, or use KICI_MODE=independent or hybrid)", s.Name, s.ID)
			}
		}
	}
	wl := logger.With("component", "webhook")
	in := webhook.NewIngress(st, proc, webhook.Options{
		MaxGitHubPayloadBytes:   cfg.Ingress.MaxGitHubPayloadBytes,
		GitHubPayloadCap:        func(ctx context.Context) int64 { return settings.Int(ctx, cluster.MaxGithubPayloadBytes) },
		EventLogMaxPayloadBytes: cfg.Ingress.EventLogMaxPayloadBytes,
		DedupTTL:                func(ctx context.Context) time.Duration { return settings.Duration(ctx, cluster.WebhookDedupTTLMs) },
		Logger:                  wl,
	})
	sched := scheduler.New(st, proc.Emit, logger.With("component", "scheduler"))
	sched.Holder, sched.CatchUpWindow = holder, window
	return &ingressWiring{sched: sched, mode: cfg.Mode, in: in, proc: proc, webhook: wl}, nil
}

// start runs the schedule-trigger scheduler (one leader across every
// orchestrator on the store) until ctx ends.
func (w *ingressWiring) start(ctx context.Context) { w.sched.Start(ctx) }

// mount registers the webhook routes on mux.
func (w *ingressWiring) mount(mux *http.ServeMux) {
	mux.Handle("POST /webhook/{orgId}/generic/{name}", api.RequestID(w.in.Generic()))
	if ServesGitHubIngress(w.mode) {
		mux.Handle("POST /webhook/{orgId}/github/{sourceId}", api.RequestID(w.in.GitHub()))
	} else {
		w.webhook.Info("GitHub webhook route not served in platform mode (relay only)")
	}
}

// emit persists an operator-emitted kici_event as an internal delivery.
func (w *ingressWiring) emit(ctx context.Context, req apitypes.EmitRequest) (string, error) {
	id := string(ingest.KindKiciEvent) + ":" + uuid.NewString()
	_, err := w.proc.Emit(ctx, id, req.OrgID, &ingest.InternalEvent{Kind: ingest.KindKiciEvent, EventName: req.EventName,
		Payload: json.RawMessage(req.Payload), SourceRepo: req.SourceRepo, SourceRoutingKey: req.SourceRoutingKey})
	return id, err
}
