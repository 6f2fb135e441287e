package cli

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"kici.dev/kici/internal/store"
)

// fakeTerminal makes terminalPrompt answer as a user at a terminal would
// (or, with ok false, as a pipe) and records the questions asked.
func fakeTerminal(t *testing.T, answer string, ok bool) *[]string {
	t.Helper()
	var asked []string
	prev := terminalPrompt
	terminalPrompt = func(w io.Writer, q string) (string, bool, error) {
		if !ok {
			return "", false, nil
		}
		asked = append(asked, q)
		return answer, true, nil
	}
	t.Cleanup(func() { terminalPrompt = prev })
	return &asked
}

func TestSourceEnableDisableDelete(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	repo, _, _ := newRepo(t)
	id := h.addLocalSource(repo, "app")
	other := h.addLocalSource(repo, "other")
	enabled := func(id string) bool {
		t.Helper()
		s, err := h.st.GetSource(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return s.Enabled
	}

	out := h.mustRun("source", "list")
	if !strings.Contains(out, "ENABLED") || !strings.Contains(out, "true") {
		t.Fatalf("list lacks the ENABLED column:\n%s", out)
	}

	// Pause: the webhook would refuse, so trigger-local says so and sends nothing.
	if out := h.mustRun("source", "disable", id); !strings.Contains(out, "Source "+id+" is disabled") || enabled(id) {
		t.Fatalf("disable: %q (enabled %t)", out, enabled(id))
	}
	if out := h.mustRun("source", "get", id); !strings.Contains(out, "false") {
		t.Fatalf("get of a disabled source:\n%s", out)
	}
	_, errs, code := h.run("source", "trigger-local", id)
	if code != 1 || !strings.Contains(errs, "is disabled") || !strings.Contains(errs, "kici-admin source enable "+id) {
		t.Fatalf("trigger-local on a disabled source: %d %q", code, errs)
	}
	h.mu.Lock()
	n := len(h.deliveries)
	h.mu.Unlock()
	if n != 0 {
		t.Fatalf("trigger-local on a disabled source delivered %d requests", n)
	}
	if out := h.mustRun("source", "enable", id, "--json"); !strings.Contains(out, `"enabled": true`) || !enabled(id) {
		t.Fatalf("enable --json: %q", out)
	}
	h.mustRun("source", "trigger-local", id)
	if _, errs, code := h.run("source", "disable", "nope"); code != 1 || !strings.Contains(errs, "HTTP 404: Source not found") {
		t.Fatalf("disable unknown: %d %q", code, errs)
	}

	// Delete without a terminal needs --yes; nothing changes.
	fakeTerminal(t, "", false)
	_, errs, code = h.run("source", "delete", id)
	if code != 1 || !strings.Contains(errs, "not a terminal") || !strings.Contains(errs, "--yes") {
		t.Fatalf("delete without a terminal: %d %q", code, errs)
	}
	// At a terminal: "n" (or just Enter) cancels, "y" deletes.
	for _, answer := range []string{"n", ""} {
		asked := fakeTerminal(t, answer, true)
		_, errs, code = h.run("source", "delete", id)
		if code != 1 || !strings.Contains(errs, "cancelled") || len(*asked) != 1 || !strings.Contains((*asked)[0], `"app"`) {
			t.Fatalf("delete answered %q: %d %q, asked %q", answer, code, errs, *asked)
		}
	}
	if _, err := h.st.GetSource(ctx, id); err != nil {
		t.Fatalf("a cancelled delete removed the source: %v", err)
	}
	fakeTerminal(t, "y", true)
	if out := h.mustRun("source", "delete", id); !strings.Contains(out, `Deleted local source "app"`) || !strings.Contains(out, "kept") {
		t.Fatalf("delete: %q", out)
	}
	if _, err := h.st.GetSource(ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("source after delete: %v", err)
	}
	// --yes never asks.
	asked := fakeTerminal(t, "n", true)
	if out := h.mustRun("source", "delete", other, "--yes", "--json"); !strings.Contains(out, `"deleted": true`) || len(*asked) != 0 {
		t.Fatalf("delete --yes --json: %q, asked %q", out, *asked)
	}
	if _, errs, code := h.run("source", "delete", other, "--yes"); code != 1 || !strings.Contains(errs, "HTTP 404") {
		t.Fatalf("delete unknown: %d %q", code, errs)
	}
	if out := h.mustRun("source", "list"); strings.Contains(out, id) || strings.Contains(out, other) {
		t.Fatalf("list after delete:\n%s", out)
	}
}
