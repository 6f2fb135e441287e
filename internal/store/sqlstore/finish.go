package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"kici.dev/kici/internal/store"
)

// FinishDeliveryOutcome finishes the delivery and its event-log entry in one
// transaction.
func (s *Store) FinishDeliveryOutcome(ctx context.Context, id string, status store.DeliveryStatus, errText string, decisions json.RawMessage, o store.EventOutcome) error {
	return s.FinishDeliveryWithRuns(ctx, id, status, errText, decisions, o, nil)
}

// FinishDeliveryWithRuns creates runs (rows, jobs, contexts) and finishes
// the delivery and its event-log entry in one transaction: all or nothing.
// On PostgreSQL the transaction is one pipeline (pipelineTx): two round
// trips whatever the number of runs.
func (s *Store) FinishDeliveryWithRuns(ctx context.Context, id string, status store.DeliveryStatus, errText string, decisions json.RawMessage, o store.EventOutcome, runs []store.NewRun) error {
	f := store.DeliveryFinish{ID: id, Status: status, Error: errText, Decisions: decisions, Outcome: o, Runs: runs}
	return s.finishAll(ctx, []store.DeliveryFinish{f}, deliveryFinishedOrMissing)
}

// FinishDeliveries finishes several deliveries, with their runs, in one
// transaction: all or nothing, with an error wrapping ErrConflict when a
// delivery of the group is no longer "received" or does not exist (the
// caller finishes them one by one to learn which).
func (s *Store) FinishDeliveries(ctx context.Context, fs []store.DeliveryFinish) error {
	return s.finishAll(ctx, fs, func(context.Context, conn, string) error {
		return errBatchRefused
	})
}

// errBatchRefused: a delivery of a FinishDeliveries batch was not
// "received"; nothing was written.
var errBatchRefused = fmt.Errorf("%w: a delivery of the batch is no longer received", store.ErrConflict)

// finishAll writes every finish of fs in one transaction, each delivery's
// own update first, and rolls everything back when one of those updates
// changes nothing: unchanged then says why for that delivery's id.
func (s *Store) finishAll(ctx context.Context, fs []store.DeliveryFinish, unchanged func(context.Context, conn, string) error) error {
	for _, f := range fs {
		for _, r := range f.Runs {
			runDefaults(r.Run, r.Jobs)
		}
	}
	at := now()
	if s.d.Postgres {
		rec := &recorder{}
		heads := make([]int, 0, len(fs)) // where each delivery's own update is
		var err error
		for _, f := range fs {
			heads = append(heads, len(rec.stmts))
			if err = finishDelivery(ctx, conn{q: rec, d: s.d}, f, at); err != nil {
				break
			}
		}
		if err == nil {
			// The rest of a delivery stands only if its update changed
			// the row: the pipeline cannot branch, so it is rolled back
			// whole when one did not.
			var affected []int64
			affected, err = s.pipelineTx(ctx, rec.stmts, func(affected []int64) bool {
				return firstUnchanged(heads, affected) < 0
			})
			if errors.Is(err, errPipelineRefused) {
				// Finished by another node (or never there): whatever the
				// rest did was rolled back.
				err = unchanged(ctx, s.conn, fs[firstUnchanged(heads, affected)].ID)
			}
		}
		if !errors.Is(err, errNoPipeline) {
			return mapErr(err)
		}
	}
	return mapErr(s.tx(ctx, func(tx conn) error {
		// Each delivery is finished first, and only from "received": of
		// two nodes finishing it (one whose claim ran out), the second
		// waits on the row (PostgreSQL) or the writer (SQLite), changes
		// nothing and rolls back, so its runs are never created twice.
		for _, f := range fs {
			res, err := tx.exec(ctx, finishDeliverySQL, finishDeliveryArgs(s.d, f, at)...)
			if ok, err := changed(res, err); err != nil || !ok {
				if err == nil {
					err = unchanged(ctx, tx, f.ID)
				}
				return err
			}
			if err := finishDeliveryRest(ctx, tx, f, at); err != nil {
				return err
			}
		}
		return nil
	}))
}

// firstUnchanged is the index (into heads) of the first delivery whose
// own update, at affected[heads[i]], did not change exactly one row, or -1.
func firstUnchanged(heads []int, affected []int64) int {
	for i, h := range heads {
		if h >= len(affected) || affected[h] != 1 {
			return i
		}
	}
	return -1
}

// finishDeliverySQL finishes a delivery still "received".
const finishDeliverySQL = `UPDATE deliveries SET status = ?, error = ?, decisions = ?, processed_at = ?,
	claimed_by = NULL, claim_expires_at = NULL WHERE id = ? AND status = ?`

func finishDeliveryArgs(d *Dialect, f store.DeliveryFinish, at time.Time) []any {
	return []any{f.Status, f.Error, rawArg(f.Decisions), d.ts(at), f.ID, store.DeliveryReceived}
}

// finishDelivery writes every statement of a delivery's finish through q,
// the delivery's own update first.
func finishDelivery(ctx context.Context, q conn, f store.DeliveryFinish, at time.Time) error {
	if _, err := q.exec(ctx, finishDeliverySQL, finishDeliveryArgs(q.d, f, at)...); err != nil {
		return err
	}
	return finishDeliveryRest(ctx, q, f, at)
}

// finishDeliveryRest stores the runs and the event-log outcome of a
// delivery whose update went through.
func finishDeliveryRest(ctx context.Context, q conn, f store.DeliveryFinish, at time.Time) error {
	for _, r := range f.Runs {
		if err := insertRun(ctx, q, r.Run, r.Jobs); err != nil {
			return err
		}
		if r.Context != nil {
			if err := putRunContext(ctx, q, r.Run.ID, r.Context); err != nil {
				return err
			}
		}
	}
	o := f.Outcome
	var runIDs any
	if o.RunIDs != nil {
		runIDs, _ = jsonArg(o.RunIDs, false)
	}
	_, err := q.exec(ctx, `UPDATE event_log SET status = ?, matched_count = ?, run_ids = ?, error_message = ?, processed_at = ?,
		repo_identifier = CASE WHEN ? = '' THEN repo_identifier ELSE ? END,
		ref = CASE WHEN ? = '' THEN ref ELSE ? END,
		action = CASE WHEN ? = '' THEN action ELSE ? END
		WHERE delivery_id = ? AND is_primary`,
		o.Status, o.MatchedCount, runIDs, f.Error, q.d.ts(at), o.RepoIdentifier, o.RepoIdentifier, o.Ref, o.Ref, o.Action, o.Action, f.ID)
	return err
}

// deliveryFinishedOrMissing explains why a delivery could not be finished:
// ErrConflict when it exists (already finished), ErrNotFound otherwise.
func deliveryFinishedOrMissing(ctx context.Context, q conn, id string) error {
	var n int
	if err := q.queryRow(ctx, `SELECT count(*) FROM deliveries WHERE id = ?`, id).Scan(&n); err != nil {
		return mapErr(err)
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return store.ErrConflict
}
