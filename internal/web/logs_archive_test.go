package web

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/blobstore"
	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/protocol"
)

// The job page reads an archived log as it read the live one: pages,
// search and the raw download, after the live file is gone.
func TestLogPagesOfAnArchivedLog(t *testing.T) {
	var arch *logstore.Archived
	h := newHarness(t, func(d *Deps) {
		blobs, err := blobstore.NewDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if arch, err = logstore.NewArchived(d.Logs.(*logstore.FS), blobs, nil); err != nil {
			t.Fatal(err)
		}
		d.Logs = arch
	})
	job := h.jobIDs[1]
	var lines []protocol.LogLine
	for i := 1; i <= 2500; i++ {
		lines = append(lines, protocol.LogLine{Timestamp: int64(i), Stream: protocol.StreamStdout, Text: fmt.Sprintf("line %d", i)})
	}
	if err := arch.Append(h.runID, job, 0, lines); err != nil {
		t.Fatal(err)
	}
	if ok, err := arch.ArchiveStep(context.Background(), logstore.StepRef{RunID: h.runID, JobID: job, Step: 0}); err != nil || !ok {
		t.Fatalf("ArchiveStep = %v, %v", ok, err)
	}
	if n, _ := h.logs.Lines(h.runID, job, 0); n != 0 {
		t.Fatalf("%d live lines after archiving", n)
	}
	c := h.client()
	c.signIn(h.tokens[auth.RoleAuditor])
	page := h.jobURL(1) + "?step=0"
	_, body, _ := c.get(page + "&from=2000")
	if n := strings.Count(body, `<tr id="L`); n != 500 {
		t.Fatalf("last page: %d lines", n)
	}
	mustContain(t, "last page", body, `id="L2001"`, `id="L2500"`, `rel="prev"`)
	_, body, _ = c.get(page + "&q=line+250")
	mustContain(t, "search", body, "2 matching lines", "#L250\"", "from=2000&amp;step=0#L2500")
	_, raw, _ := c.get(fmt.Sprintf("/ui/runs/%s/jobs/%s/steps/0/raw", h.runID, job))
	if got := strings.Count(raw, "\n"); got != 2500 || !strings.HasPrefix(raw, "line 1\nline 2\n") || !strings.HasSuffix(raw, "line 2500\n") {
		t.Fatalf("raw log: %d lines", got)
	}
}
