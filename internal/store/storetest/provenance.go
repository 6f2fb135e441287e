package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"kici.dev/kici/internal/store"
)

// testProvenance covers ProvenanceStore: the one-active-key guarantee (also
// under concurrent creation), rotation statuses, revocation and attestation
// bundles.
func testProvenance(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	key := func(kid string) *store.SigningKey {
		return &store.SigningKey{Kid: kid, PublicJWK: json.RawMessage(`{"kty":"EC","crv":"P-256","kid":"` + kid + `"}`),
			EncryptedPrivateJWK: []byte{0, 1, 2, 0xff}, CreatedAt: at(0)}
	}
	if _, err := s.GetActiveSigningKey(ctx); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("active key on empty store: %v", err)
	}

	// Concurrent creators: exactly one wins, the others get ErrConflict.
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.CreateActiveSigningKey(ctx, key(fmt.Sprintf("k%d", i)))
		}()
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, store.ErrConflict):
			t.Fatalf("concurrent create: %v", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d creators won, want exactly 1", wins)
	}
	first, err := s.GetActiveSigningKey(ctx)
	must(t, err)
	if first.Status != store.SigningKeyActive || first.Alg != "ES256" || first.SignerKind != "db" || first.ActivatedAt == nil {
		t.Fatalf("active key: %+v", first)
	}
	if string(first.EncryptedPrivateJWK) != string([]byte{0, 1, 2, 0xff}) {
		t.Fatalf("private blob round trip: %v", first.EncryptedPrivateJWK)
	}
	var pub map[string]string
	must(t, json.Unmarshal(first.PublicJWK, &pub))
	if pub["kid"] != first.Kid {
		t.Fatalf("public jwk round trip: %s", first.PublicJWK)
	}

	// Rotation: active → retiring; next rotation: retiring → retired.
	must(t, s.RotateSigningKey(ctx, key("second")))
	must(t, s.RotateSigningKey(ctx, key("third")))
	status := map[string]store.SigningKeyStatus{}
	list, err := s.ListSigningKeys(ctx)
	must(t, err)
	for _, k := range list {
		status[k.Kid] = k.Status
	}
	if status[first.Kid] != store.SigningKeyRetired || status["second"] != store.SigningKeyRetiring || status["third"] != store.SigningKeyActive {
		t.Fatalf("statuses after two rotations: %v", status)
	}
	if err := s.CreateActiveSigningKey(ctx, key("fourth")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second active key accepted: %v", err)
	}

	// Revocation.
	ok, err := s.RevokeSigningKey(ctx, "second", "leaked", at(9))
	must(t, err)
	if !ok {
		t.Fatal("revoke reported no change")
	}
	if ok, err := s.RevokeSigningKey(ctx, "second", "again", at(10)); err != nil || ok {
		t.Fatalf("second revoke: %v %v", ok, err)
	}
	got, err := s.GetSigningKey(ctx, "second")
	must(t, err)
	if got.Status != store.SigningKeyRevoked || got.RevocationReason != "leaked" || got.RevokedAt == nil || !got.RevokedAt.Equal(at(9)) {
		t.Fatalf("revoked key: %+v", got)
	}
	if _, err := s.RevokeSigningKey(ctx, "nope", "x", at(9)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoke unknown: %v", err)
	}

	// Attestations.
	must(t, s.CreateRun(ctx, fullRun("prov-run", at(0)), []*store.Job{{ID: "prov-job", JobName: "build", BaseJobName: "build"}}))
	a1 := &store.Attestation{ID: "att-1", RunID: "prov-run", JobID: "prov-job", SubjectName: "a.tgz",
		SubjectDigest: "sha256:aa", Kid: "third", Bundle: json.RawMessage(`{"n":1}`), CreatedAt: at(1)}
	a2 := &store.Attestation{ID: "att-2", RunID: "prov-run", JobID: "prov-job", SubjectName: "b.tgz",
		SubjectDigest: "sha256:bb", Kid: "third", Bundle: json.RawMessage(`{"n":2}`), CreatedAt: at(2)}
	must(t, s.PutAttestation(ctx, a1))
	must(t, s.PutAttestation(ctx, a2))
	g, err := s.GetAttestation(ctx, "att-1")
	must(t, err)
	var b map[string]int
	must(t, json.Unmarshal(g.Bundle, &b))
	if g.SubjectName != "a.tgz" || g.SubjectDigest != "sha256:aa" || b["n"] != 1 || !g.CreatedAt.Equal(at(1)) {
		t.Fatalf("attestation round trip: %+v", g)
	}
	// Same subject digest again replaces.
	must(t, s.PutAttestation(ctx, &store.Attestation{ID: "att-3", RunID: "prov-run", JobID: "prov-job", SubjectName: "a.tgz",
		SubjectDigest: "sha256:aa", Kid: "third", Bundle: json.RawMessage(`{"n":3}`), CreatedAt: at(3)}))
	all, err := s.ListAttestations(ctx, "prov-run")
	must(t, err)
	if len(all) != 2 || all[0].ID != "att-2" || all[1].ID != "att-3" {
		t.Fatalf("list after replace: %+v", all)
	}
	if _, err := s.GetAttestation(ctx, "att-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("replaced attestation still readable: %v", err)
	}
	if err := s.PutAttestation(ctx, &store.Attestation{ID: "att-x", RunID: "no-run", JobID: "j", SubjectDigest: "sha256:cc", Bundle: json.RawMessage(`{}`)}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("attestation for unknown run: %v", err)
	}
}
