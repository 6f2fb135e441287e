package storetest

import (
	"fmt"
	"sync"
	"testing"

	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// testReleaseJobsConcurrently: releases made at the same moment (the
// delivery pool's workers each releasing the jobs of the run it stored)
// each get their own outcome: every
// pending job is queued once with one entry, a second release of the same
// job and a release of an unknown job get nothing, and no release is lost.
func testReleaseJobsConcurrently(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	const n = 40
	var jobs []*store.Job
	for i := 0; i < n; i++ {
		jobs = append(jobs, &store.Job{ID: fmt.Sprintf("crel-%d", i), JobName: fmt.Sprintf("j%d", i), Needs: []store.Need{}})
	}
	must(t, s.CreateRun(ctx, fullRun("crel", at(0)), jobs))

	type outcome struct {
		job    *store.Job
		stored bool
		err    error
	}
	// Each job is released twice, and each round also releases a job
	// that does not exist, all at once.
	out := make([][2]outcome, n)
	unknown := make([]outcome, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		for k := 0; k < 2; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := jobs[i].ID
				e := &store.QueueEntry{ID: id, RunID: "crel", JobName: jobs[i].JobName, CreatedAt: at(1)}
				j, stored, err := s.ReleaseJob(ctx, id, e)
				out[i][k] = outcome{j, stored, err}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("crel-missing-%d", i)
			j, stored, err := s.ReleaseJob(ctx, id, &store.QueueEntry{ID: id, RunID: "crel", CreatedAt: at(1)})
			unknown[i] = outcome{j, stored, err}
		}()
	}
	wg.Wait()

	for i, pair := range out {
		var released int
		for _, o := range pair {
			must(t, o.err)
			if o.job != nil {
				released++
				if o.job.ID != jobs[i].ID || o.job.Status != status.JobQueued || !o.stored {
					t.Errorf("release of %s = %+v, stored %v; want that job, queued, its entry stored", jobs[i].ID, o.job, o.stored)
				}
			} else if o.stored {
				t.Errorf("a refused release of %s says its entry was stored", jobs[i].ID)
			}
		}
		if released != 1 {
			t.Errorf("%s: %d of its two releases moved it; want exactly one", jobs[i].ID, released)
		}
		got, err := s.GetJob(ctx, jobs[i].ID)
		must(t, err)
		if got.Status != status.JobQueued {
			t.Errorf("%s is %s after its releases; want queued", jobs[i].ID, got.Status)
		}
		if _, err := s.GetQueueEntry(ctx, jobs[i].ID); err != nil {
			t.Errorf("%s has no queue entry: %v", jobs[i].ID, err)
		}
	}
	for i, o := range unknown {
		if o.err != nil || o.job != nil || o.stored {
			t.Errorf("release of unknown job %d = %+v, %v, %v; want nil, false, nil", i, o.job, o.stored, o.err)
		}
		_, err := s.GetQueueEntry(ctx, fmt.Sprintf("crel-missing-%d", i))
		wantErr(t, "entry of an unknown job's release", err, store.ErrNotFound)
	}
}
