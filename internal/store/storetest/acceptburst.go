package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"kici.dev/kici/internal/store"
)

// testAcceptBurst: many concurrent accepts (which the store may commit in
// groups) each end exactly as alone would: a new id stored with one
// primary event-log entry, a repeated id refused with ErrConflict, and a
// call whose own rows are at fault (its entry's id taken) refused alone
// while the others of its group are stored.
func testAcceptBurst(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.AcceptDelivery(ctx, &store.Delivery{ID: "burst:taken", SourceID: "src", OrgID: "org", Event: "push"},
		&store.EventLogEntry{ID: "entry-taken", OrgID: "org", SourceID: "src", Event: "push"}))
	const n = 60
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			id := fmt.Sprintf("burst:%d", i)
			e := &store.EventLogEntry{OrgID: "org", SourceID: "src", Event: "push"}
			switch {
			case i%10 == 3: // the same id as the call before it
				id = fmt.Sprintf("burst:%d", i-1)
			case i == 17: // an entry id already used: this call's own fault
				e.ID = "entry-taken"
			}
			errs[i] = s.AcceptDelivery(ctx, &store.Delivery{ID: id, SourceID: "src", OrgID: "org", Event: "push"}, e)
		}(i)
	}
	wg.Wait()
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("burst:%d", i)
		switch {
		case i%10 == 3:
			// burst:i-1 was written twice: exactly one of the two won.
			if (errs[i] == nil) == (errs[i-1] == nil) || !(errors.Is(errs[i], store.ErrConflict) || errors.Is(errs[i-1], store.ErrConflict)) {
				t.Errorf("two accepts of burst:%d: %v and %v, want one stored and one ErrConflict", i-1, errs[i-1], errs[i])
			}
			if _, err := s.GetDelivery(ctx, id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s: stored although never sent (%v)", id, err)
			}
		case i == 17:
			if errs[i] == nil {
				t.Errorf("%s: accepted with an event-log id already taken", id)
			}
			if _, err := s.GetDelivery(ctx, id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s: the refused delivery was stored (%v)", id, err)
			}
		case (i+1)%10 == 3:
			// checked with its twin
		default:
			if errs[i] != nil {
				t.Errorf("%s: %v", id, errs[i])
			}
		}
		if i == 17 || i%10 == 3 {
			continue
		}
		d, err := s.GetDelivery(ctx, id)
		if err != nil || d.Status != store.DeliveryReceived {
			t.Errorf("%s: %+v, %v; want stored as received", id, d, err)
			continue
		}
		if e, err := s.GetEventLog(ctx, "", id); err != nil || e.Status != store.EventLogReceived || e.DeliveryID != id {
			t.Errorf("%s: primary entry %+v, %v", id, e, err)
		}
	}
}
