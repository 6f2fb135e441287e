package storetest

import (
	"context"
	"fmt"
	"testing"

	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// BenchmarkClaimNext measures enqueue+claim round trips on s: each
// iteration enqueues one labelled entry and claims it back with ClaimNext,
// against a backlog of entries no benchmark agent may take (so the claim
// query has to skip rows).
func BenchmarkClaimNext(b *testing.B, s store.Store) {
	ctx := context.Background()
	for i := 0; i < 200; i++ {
		if err := s.Enqueue(ctx, &store.QueueEntry{ID: fmt.Sprintf("backlog-%d", i), RunID: "r", JobName: "j",
			RunsOnLabels: []string{"windows"}}); err != nil {
			b.Fatal(err)
		}
	}
	labels := []string{"linux", "x64", "docker"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("e-%d", i)
		if err := s.Enqueue(ctx, &store.QueueEntry{ID: id, RunID: "r", JobName: "j", RunsOnLabels: []string{"linux"}}); err != nil {
			b.Fatal(err)
		}
		e, err := s.ClaimNext(ctx, "agent", labels, at(60))
		if err != nil {
			b.Fatal(err)
		}
		if e == nil || e.ID != id {
			b.Fatalf("claimed %+v, want %s", e, id)
		}
	}
}

// BenchmarkDispatchRows measures what the dispatcher reads to build one
// job.dispatch, on a run of 8 jobs with a context and outputs: "together"
// is DispatchRows, "one by one" the five reads it replaced (the job, its
// run, the run's jobs, context and outputs, one after the other).
func BenchmarkDispatchRows(b *testing.B, s store.Store) {
	ctx := context.Background()
	var jobs []*store.Job
	for i := range 8 {
		jobs = append(jobs, &store.Job{ID: fmt.Sprintf("bd-%d", i), JobName: fmt.Sprintf("leg %d", i), BaseJobName: "leg",
			MatrixValues: map[string]string{"leg": fmt.Sprint(i)}, Config: []byte(`{"steps":[{"run":"make test"}]}`), RunsOnLabels: []string{"linux"}})
	}
	if err := s.CreateRun(ctx, fullRun("bd-run", at(0)), jobs); err != nil {
		b.Fatal(err)
	}
	if err := s.PutRunContext(ctx, "bd-run", &store.RunContext{Inputs: map[string]any{"target": "prod"}, ChangedPaths: []string{"go.mod"}}); err != nil {
		b.Fatal(err)
	}
	if err := s.PutJobOutputs(ctx, "bd-0", map[string]string{"version": "1.2.3"}); err != nil {
		b.Fatal(err)
	}
	b.Run("together", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.DispatchRows(ctx, "bd-run", "bd-3"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one by one", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			job, err := s.GetJob(ctx, "bd-3")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.GetRun(ctx, job.RunID); err != nil {
				b.Fatal(err)
			}
			if _, err := s.ListJobs(ctx, job.RunID); err != nil {
				b.Fatal(err)
			}
			if _, err := s.GetRunContext(ctx, job.RunID); err != nil {
				b.Fatal(err)
			}
			if _, err := s.ListJobOutputs(ctx, job.RunID); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkStartJob measures a job's start, the first job of its run (so
// the run moves too): "together" is StartJob, "apart" the two writes it
// replaced (MoveJob, then UpdateRunStatus). Each iteration starts a job
// of its own run, created before the timer starts.
func BenchmarkStartJob(b *testing.B, s store.Store) {
	ctx := context.Background()
	agent := "agent-1"
	rounds := 0
	runs := func(b *testing.B, kind string) string {
		b.Helper()
		rounds++ // each round's runs are new: a benchmark runs several
		prefix := fmt.Sprintf("%s%d", kind, rounds)
		for i := range b.N {
			id := fmt.Sprintf("%s-%d", prefix, i)
			if err := s.CreateRun(ctx, fullRun(id, at(0)), []*store.Job{{ID: id + "-job", JobName: "build", RunsOnLabels: []string{"linux"}}}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		b.ResetTimer()
		return prefix
	}
	started := func(b *testing.B, j *store.Job, err error) {
		if err != nil || j == nil {
			b.Fatalf("start: %+v, %v", j, err)
		}
	}
	b.Run("together", func(b *testing.B) {
		prefix := runs(b, "t")
		for i := range b.N {
			when := at(10)
			j, err := s.StartJob(ctx, fmt.Sprintf("%s-%d-job", prefix, i), store.JobUpdate{AgentID: &agent, StartedAtIfUnset: &when, LastHeartbeatAt: &when}, when)
			started(b, j, err)
		}
	})
	b.Run("apart", func(b *testing.B) {
		prefix := runs(b, "a")
		for i := range b.N {
			when := at(10)
			j, err := s.MoveJob(ctx, fmt.Sprintf("%s-%d-job", prefix, i), status.JobsMovingTo(status.JobRunning), status.JobRunning,
				store.JobUpdate{AgentID: &agent, StartedAtIfUnset: &when, LastHeartbeatAt: &when})
			started(b, j, err)
			if _, err := s.UpdateRunStatus(ctx, j.RunID, status.RunsMovingTo(status.RunRunning), status.RunRunning, store.RunUpdate{StartedAt: &when}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
