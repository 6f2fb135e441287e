package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/store"
)

// testDeliveryClaims covers store.DeliveryClaimStore: of eight nodes
// claiming one delivery at once exactly one wins; the winner renews; a
// live claim keeps the others out; an expired one can be taken; a release
// or a finished delivery lets nobody (finished) or anybody (released) in;
// TakeDelivery returns the row it claimed,
// and a delivery is finished with its runs once.
func testDeliveryClaims(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	insert := func(id string) {
		t.Helper()
		must(t, s.InsertDelivery(ctx, &store.Delivery{ID: id, SourceID: "s", OrgID: "o", Event: "push", Payload: json.RawMessage(`{}`)}))
	}
	claim := func(id, holder string, ttl time.Duration) bool {
		t.Helper()
		ok, err := s.ClaimDelivery(ctx, id, holder, ttl)
		must(t, err)
		return ok
	}

	// TakeDelivery: the claim and the row in one write; nothing for a
	// delivery another holder has.
	insert("t1")
	took, runs, err := s.TakeDelivery(ctx, "t1", "node-a", time.Minute)
	must(t, err)
	if took == nil || took.ID != "t1" || took.Status != store.DeliveryReceived || string(took.Payload) != `{}` || took.SourceID != "s" {
		t.Fatalf("TakeDelivery(t1) by node-a = %+v; want the received delivery with its payload", took)
	}
	if runs {
		t.Fatal("TakeDelivery(t1) reports runs stored for a delivery that has none")
	}
	if d, _, err := s.TakeDelivery(ctx, "t1", "node-b", time.Minute); err != nil || d != nil {
		t.Fatalf("TakeDelivery(t1) by node-b under node-a's live claim = %+v, %v; want nil, nil", d, err)
	}
	// A run naming the delivery (stored by an earlier, unfinished
	// processing) is reported with the claim.
	must(t, s.CreateRun(ctx, &store.Run{ID: "t1-run", WorkflowName: "ci", DeliveryID: "t1"}, []*store.Job{{ID: "t1-job", JobName: "build"}}))
	if d, runs, err := s.TakeDelivery(ctx, "t1", "node-a", time.Minute); err != nil || d == nil || !runs {
		t.Fatalf("node-a taking its own t1 again = %+v, runs stored %v, %v; want the delivery (a restarted node) and its stored run", d, runs, err)
	}
	if d, runs, err := s.TakeDelivery(ctx, "missing", "node-a", time.Minute); err != nil || d != nil || runs {
		t.Fatalf("TakeDelivery(missing) = %+v, %v, %v; want nil, false, nil", d, runs, err)
	}

	insert("d1")
	var wg sync.WaitGroup
	wins := make([]bool, 8)
	for i := range wins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := s.ClaimDelivery(ctx, "d1", fmt.Sprintf("node-%d", i), time.Minute)
			if err != nil {
				t.Errorf("claim by node-%d: %v", i, err)
			}
			wins[i] = ok
		}()
	}
	wg.Wait()
	winner := -1
	for i, ok := range wins {
		if ok && winner >= 0 {
			t.Fatalf("node-%d and node-%d both claimed d1", winner, i)
		}
		if ok {
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no node claimed the unclaimed d1")
	}
	holder := fmt.Sprintf("node-%d", winner)
	other := fmt.Sprintf("node-%d", (winner+1)%len(wins))
	if !claim("d1", holder, time.Minute) {
		t.Fatal("the holder could not renew its claim")
	}
	if claim("d1", other, time.Minute) {
		t.Fatal("another node took a live claim")
	}
	// Releasing someone else's claim changes nothing; the holder's own
	// release lets another node in at once.
	must(t, s.ReleaseDeliveryClaim(ctx, "d1", other))
	if claim("d1", other, time.Minute) {
		t.Fatal("a release by a non-holder dropped the claim")
	}
	must(t, s.ReleaseDeliveryClaim(ctx, "d1", holder))
	if !claim("d1", other, time.Minute) {
		t.Fatal("a released claim could not be taken")
	}

	// An expired lease (its node died) is taken by another node.
	insert("d2")
	if !claim("d2", "node-a", time.Millisecond) {
		t.Fatal("node-a could not claim the unclaimed d2")
	}
	time.Sleep(20 * time.Millisecond)
	if !claim("d2", "node-b", time.Minute) {
		t.Fatal("node-b could not take d2 after node-a's lease expired")
	}
	if claim("d2", "node-a", time.Minute) {
		t.Fatal("node-a took d2 back from node-b's live claim")
	}

	// Finishing clears the claim, and a finished delivery is claimed by
	// nobody, through either finish path.
	must(t, s.FinishDelivery(ctx, "d1", store.DeliveryProcessed, "", nil))
	must(t, s.FinishDeliveryOutcome(ctx, "d2", store.DeliveryFailed, "boom", nil, store.EventOutcome{Status: store.EventLogFailed}))
	for _, id := range []string{"d1", "d2"} {
		for _, h := range []string{holder, other, "node-a", "node-b", "node-new"} {
			if claim(id, h, time.Minute) {
				t.Fatalf("%s claimed the finished delivery %s", h, id)
			}
		}
	}
	// A node whose claim ran out finishing the delivery again, with its
	// runs, writes nothing: the runs exist once.
	late := store.NewRun{Run: &store.Run{ID: "run-late", WorkflowName: "ci", DeliveryID: "d2"}}
	err = s.FinishDeliveryWithRuns(ctx, "d2", store.DeliveryProcessed, "", nil, store.EventOutcome{Status: store.EventLogProcessed}, []store.NewRun{late})
	wantErr(t, "finishing a finished delivery", err, store.ErrConflict)
	_, err = s.GetRun(ctx, "run-late")
	wantErr(t, "run of a refused finish", err, store.ErrNotFound)
	if d, err := s.GetDelivery(ctx, "d2"); err != nil || d.Status != store.DeliveryFailed || d.Error != "boom" {
		t.Fatalf("d2 after a refused finish: %+v %v, want failed/boom unchanged", d, err)
	}
	if claim("unknown", "node-a", time.Minute) {
		t.Fatal("an unknown delivery was claimed")
	}
}

// testAcceptedClaim covers a delivery stored already claimed
// (Delivery.ClaimedBy on AcceptDelivery and InsertDelivery): its holder
// has it as if it had claimed it, no other node takes it while the claim
// lasts, one whose claim ran out is taken, and an unclaimed insert stays
// free for anyone.
func testAcceptedClaim(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	entry := func() *store.EventLogEntry {
		return &store.EventLogEntry{SourceID: "src", OrgID: "org", Event: "push"}
	}
	must(t, s.AcceptDelivery(ctx, &store.Delivery{ID: "ac-live", SourceID: "src", OrgID: "org", Event: "push",
		Payload: json.RawMessage(`{}`), ClaimedBy: "node-a", ClaimExpiresAt: time.Now().Add(time.Minute)}, entry()))
	if ok, err := s.ClaimDelivery(ctx, "ac-live", "node-b", time.Minute); err != nil || ok {
		t.Fatalf("node-b claiming a delivery accepted under node-a's claim = %v, %v; want false", ok, err)
	}
	if d, _, err := s.TakeDelivery(ctx, "ac-live", "node-b", time.Minute); err != nil || d != nil {
		t.Fatalf("node-b taking a delivery accepted under node-a's claim = %+v, %v; want nil", d, err)
	}
	if d, runs, err := s.TakeDelivery(ctx, "ac-live", "node-a", time.Minute); err != nil || d == nil || runs {
		t.Fatalf("node-a taking the delivery it accepted = %+v, runs %v, %v; want the delivery, no runs", d, runs, err)
	}

	// The accepting node died before processing: once its claim ran out,
	// another node takes the delivery.
	must(t, s.AcceptDelivery(ctx, &store.Delivery{ID: "ac-dead", SourceID: "src", OrgID: "org", Event: "push",
		ClaimedBy: "node-a", ClaimExpiresAt: time.Now().Add(-time.Second)}, entry()))
	if ok, err := s.ClaimDelivery(ctx, "ac-dead", "node-b", time.Minute); err != nil || !ok {
		t.Fatalf("node-b claiming a delivery whose accept-time claim ran out = %v, %v; want true", ok, err)
	}

	// InsertDelivery honours a claim too; without one, anyone may claim.
	must(t, s.InsertDelivery(ctx, &store.Delivery{ID: "ins-claimed", SourceID: "src", OrgID: "org", Event: "push",
		ClaimedBy: "node-a", ClaimExpiresAt: time.Now().Add(time.Minute)}))
	if ok, err := s.ClaimDelivery(ctx, "ins-claimed", "node-b", time.Minute); err != nil || ok {
		t.Fatalf("node-b claiming a delivery inserted under node-a's claim = %v, %v; want false", ok, err)
	}
	must(t, s.AcceptDelivery(ctx, &store.Delivery{ID: "ac-free", SourceID: "src", OrgID: "org", Event: "push"}, entry()))
	if ok, err := s.ClaimDelivery(ctx, "ac-free", "node-b", time.Minute); err != nil || !ok {
		t.Fatalf("node-b claiming a delivery accepted without a claim = %v, %v; want true", ok, err)
	}
}
