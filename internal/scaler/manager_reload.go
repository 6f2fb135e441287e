package scaler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"kici.dev/kici/internal/scaler/scalerconfig"
)

// Reload applies a new configuration atomically: every check runs first
// and any failure (a changed type or socket, a backend that cannot be
// built) leaves the running configuration untouched. Kept scalers take
// their new caps, spawn limits and label sets; added scalers get a new
// backend; removed scalers are retired: no new spawns, their running
// agents finish their jobs, and the backend is shut down once none remain.
func (m *Manager) Reload(cfg *Config) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return errors.New("scaler is shutting down")
	}
	old := map[string]*scalerState{}
	for _, sc := range m.scalers {
		if !sc.retiring {
			old[sc.entry.Name] = sc
		}
	}
	for _, e := range cfg.Scalers {
		if sc, ok := old[e.Name]; ok {
			if sc.entry.Type != e.Type {
				m.mu.Unlock()
				return &ConfigError{File: e.File(), Field: "scalers[" + e.Name + "].type",
					Msg: fmt.Sprintf("cannot change from %s to %s on reload (remove the scaler, reload, then add it under a new name)", sc.entry.Type, e.Type)}
			}
			if sc.entry.SocketPath != e.SocketPath || sc.entry.EnforceCgroups != e.EnforceCgroups {
				m.mu.Unlock()
				return &ConfigError{File: e.File(), Field: "scalers[" + e.Name + "]",
					Msg: "socketPath and enforceCgroups cannot change on reload (restart, or add the scaler under a new name)"}
			}
			if scalerconfig.KubernetesImmutableChanged(sc.entry, e) {
				m.mu.Unlock()
				return &ConfigError{File: e.File(), Field: "scalers[" + e.Name + "]",
					Msg: "namespace and kubeconfig of a kubernetes scaler cannot change on reload (restart, or add the scaler under a new name)"}
			}
			if scalerconfig.QEMUImmutableChanged(sc.entry, e) {
				m.mu.Unlock()
				return &ConfigError{File: e.File(), Field: "scalers[" + e.Name + "]",
					Msg: "network (with tap, the firecracker: block too), vmDir, uid and gid of a qemu scaler cannot change on reload (restart, or add the scaler under a new name)"}
			}
			if scalerconfig.FirecrackerImmutableChanged(sc.entry, e) {
				m.mu.Unlock()
				return &ConfigError{File: e.File(), Field: "scalers[" + e.Name + "]",
					Msg: "chrootBaseDir, uid, gid, the firecracker binary name and the firecracker: network block cannot change on reload (restart, or add the scaler under a new name)"}
			}
		}
	}
	for _, sc := range m.scalers {
		if sc.retiring {
			for _, e := range cfg.Scalers {
				if e.Name == sc.entry.Name {
					m.mu.Unlock()
					return &ConfigError{File: e.File(), Field: "scalers[" + e.Name + "].name",
						Msg: "a scaler of this name is still retiring (its agents are finishing); reload again once it is gone"}
				}
			}
		}
	}
	m.mu.Unlock()

	// Build added backends outside the lock (they may touch the runtime).
	added := map[string]Backend{}
	for _, e := range cfg.Scalers {
		if _, ok := old[e.Name]; ok {
			continue
		}
		b, err := m.opts.Backends(e, m.exitFor(e.Name))
		if err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			for _, ab := range added {
				ab.Shutdown(ctx)
			}
			cancel()
			return fmt.Errorf("scaler %s: %w", e.Name, err)
		}
		added[e.Name] = b
	}

	m.mu.Lock()
	var next []*scalerState
	keep := map[string]bool{}
	for _, e := range cfg.Scalers {
		keep[e.Name] = true
		if sc, ok := old[e.Name]; ok {
			sc.entry = e
			sc.sem.Resize(e.MaxConcurrentSpawns)
			next = append(next, sc)
			continue
		}
		next = append(next, &scalerState{entry: e, backend: added[e.Name], sem: newFifoSem(e.MaxConcurrentSpawns)})
	}
	for _, sc := range m.scalers {
		if !keep[sc.entry.Name] || sc.retiring {
			if !sc.retiring {
				m.log.Info("scaler retired", "scaler", sc.entry.Name, "agents", sc.active)
			}
			sc.retiring = true
			next = append(next, sc)
		}
	}
	m.scalers = next
	m.cfg = cfg
	m.reloads++
	m.updateGaugesLocked()
	m.mu.Unlock()
	m.retireSweep()
	m.kickWarm()
	// Kept backends that leave host-side leftovers sweep them now (added
	// ones did at construction).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, sc := range old {
		if r, ok := sc.backend.(OrphanReaper); ok && keep[name] {
			if n, err := r.ReapOrphans(ctx); err != nil {
				m.log.Warn("orphan cleanup on reload", "scaler", name, "err", err)
			} else if n > 0 {
				m.log.Info("orphans removed on reload", "scaler", name, "count", n)
			}
		}
	}
	return nil
}

// OrphanReaper is implemented by backends that can find and remove agents
// they no longer track (Container); the Manager calls it on reload.
type OrphanReaper interface {
	ReapOrphans(ctx context.Context) (int, error)
}

// SetOrchestratorURL sets the default agent WebSocket URL (used by entries
// without orchestratorUrl); the orchestrator calls it once its listener is
// bound.
func (m *Manager) SetOrchestratorURL(url string) {
	m.mu.Lock()
	m.opts.OrchestratorURL = url
	m.mu.Unlock()
}

// retireSweep shuts down retiring backends with no agents left.
func (m *Manager) retireSweep() {
	m.mu.Lock()
	var gone []*scalerState
	kept := m.scalers[:0:0]
	for _, sc := range m.scalers {
		if sc.retiring && sc.active == 0 {
			gone = append(gone, sc)
			continue
		}
		kept = append(kept, sc)
	}
	m.scalers = kept
	m.mu.Unlock()
	for _, sc := range gone {
		go func(sc *scalerState) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sc.backend.Shutdown(ctx)
			m.log.Info("retired scaler shut down", "scaler", sc.entry.Name)
		}(sc)
	}
}
