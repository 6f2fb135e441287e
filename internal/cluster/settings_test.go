package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/teststore"
	"kici.dev/kici/internal/testutil/wait"
)

func TestReaderDefaultsCacheAndPatch(t *testing.T) {
	ctx := context.Background()
	st := teststore.SQLite(t)
	// Caches of 2 s: the other reader's first read, the patch and the
	// check that it still answers from its cache fit well inside one on a
	// starved machine.
	r := NewReader(st, Defaults{AgentTokenTTLMs: 7000}, 2*time.Second, nil)
	other := NewReader(st, nil, 2*time.Second, nil) // another process's cache
	if r.AgentTokenTTL(ctx) != 7*time.Second || r.ScalerSpawnTimeout(ctx) != 300*time.Second || r.Int(ctx, LockFileMaxBytes) != 5_242_880 {
		t.Fatal("defaults")
	}
	if other.AgentTokenTTL(ctx) != time.Hour {
		t.Fatal("built-in default")
	}
	v, err := r.Patch(ctx, []byte(`{"agentTokenTtlMs": 120000, "queueTimeoutMs": 0}`))
	if err != nil {
		t.Fatal(err)
	}
	if *v.Settings["agentTokenTtlMs"] != 120000 || v.Effective["queueTimeoutMs"] != 0 || v.Settings["lockFileMaxBytes"] != nil || v.Version != 1 {
		t.Fatalf("view %+v", v)
	}
	// The patching reader sees it at once; the other one after its TTL.
	if r.AgentTokenTTL(ctx) != 2*time.Minute {
		t.Fatal("own change not visible")
	}
	if other.AgentTokenTTL(ctx) != time.Hour {
		t.Fatal("cache ignored")
	}
	wait.For(t, 10*time.Second, "the change visible to the other reader once its cache TTL is past", func() bool {
		return other.AgentTokenTTL(ctx) == 2*time.Minute
	})
	if _, err := r.Patch(ctx, []byte(`{"agentTokenTtlMs": null}`)); err != nil {
		t.Fatal(err)
	}
	if r.AgentTokenTTL(ctx) != 7*time.Second {
		t.Fatal("null did not reset to the default")
	}
}

func TestPatchRejectsBadBodiesAndChangesNothing(t *testing.T) {
	ctx := context.Background()
	teststore.Each(t, func(t *testing.T, st store.Store) {
		r := NewReader(st, nil, time.Minute, nil)
		if _, err := r.Patch(ctx, []byte(`{"queueTimeoutMs": 5}`)); err != nil {
			t.Fatal(err)
		}
		for body, want := range map[string]string{
			`{"agentTokenTtlMs": 999}`:                          "out of range [1000",
			`{"agentTokenTtlMs": 5000, "bogus": 1}`:             `unknown setting "bogus"`,
			`{"agent_token_ttl_ms": 5000}`:                      `unknown setting "agent_token_ttl_ms"`,
			`{"agentTokenTtlMs": "5000"}`:                       "must be an integer",
			`{"agentTokenTtlMs": 5000.5}`:                       "must be an integer",
			`{"agentTokenTtlMs": 99999999999999999999999}`:      "must be an integer",
			`{"lockFileMaxBytes": 2000000000}`:                  "out of range",
			`[1]`:                                               "JSON object",
			`{}`:                                                "names no setting",
			`{"queueTimeoutMs": 1} {"queueTimeoutMs": 2}`:       "single JSON object",
			`{"queueTimeoutMs": 7, "queueTimeoutMs": -1}`:       "out of range",
			`{"scalerSpawnTimeoutMs": 3600001}`:                 "out of range",
			`{"agentTokenTtlMs": 5000, "webhookDedupTtlMs": 1}`: "webhookDedupTtlMs",
		} {
			_, err := r.Patch(ctx, []byte(body))
			var pe *PatchError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), want) {
				t.Errorf("PATCH %s: %v, want %q", body, err, want)
			}
		}
		cs, err := st.GetClusterSettings(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if cs.Version != 1 || len(cs.Values) != 1 || cs.Values[QueueTimeoutMs] != 5 {
			t.Fatalf("a refused PATCH changed something: %+v", cs)
		}
	})
}

type brokenStore struct{ store.ClusterSettingsStore }

func (brokenStore) GetClusterSettings(context.Context) (*store.ClusterSettings, error) {
	return nil, errors.New("database down")
}

func TestUnreadableDatabaseYieldsDefaults(t *testing.T) {
	r := NewReader(brokenStore{}, Defaults{ScalerSpawnTimeoutMs: 9000}, time.Minute, nil)
	if r.ScalerSpawnTimeout(context.Background()) != 9*time.Second {
		t.Fatal("no default on a read error")
	}
	if _, err := r.View(context.Background()); err == nil {
		t.Fatal("View hid the error")
	}
}
