package local

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

// One repository reader serves many reads, from many goroutines, and stays
// in step after a missing object, an oversized lock and a killed process.
func TestObjectReaderSurvivesMixedReads(t *testing.T) {
	tr := newTestRepo(t)
	tr.Write(".kici/kici.lock.json", `{"a":1}`)
	small := tr.Commit("small")
	tr.Write(".kici/kici.lock.json", strings.Repeat("x", MaxLockBytes+1))
	big := tr.Commit("big")
	tr.Write(".kici/kici.lock.json", `{"b":2}`)
	last := tr.Commit("last")
	repo, err := Open(tr.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	ctx := context.Background()

	if _, err := repo.ReadLock(ctx, big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("oversized lock: %v", err)
	}
	if _, err := repo.ReadLock(ctx, strings.Repeat("cd", 20)); !errors.Is(err, ErrCommitNotFound) {
		t.Fatalf("unknown commit: %v", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sha, want := small, `{"a":1}`
			if i%2 == 1 {
				sha, want = last, `{"b":2}`
			}
			data, err := repo.ReadLock(ctx, sha)
			if err != nil || string(data) != want {
				errs <- errors.New("read " + sha + ": " + string(data) + " " + errString(err))
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// A reader that died is replaced on the next read.
	repo.mu.Lock()
	_ = repo.cat.cmd.Process.Kill()
	repo.mu.Unlock()
	_, _ = repo.ReadLock(ctx, small) // may fail: it is the read that finds the reader dead
	if data, err := repo.ReadLock(ctx, last); err != nil || string(data) != `{"b":2}` {
		t.Fatalf("read after the reader died: %q %v", data, err)
	}
	repo.Close()
	if data, err := repo.ReadLock(ctx, small); err != nil || string(data) != `{"a":1}` {
		t.Fatalf("read after Close: %q %v", data, err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
