package logstore

import (
	"math"
	"strings"
	"testing"

	"kici.dev/kici/internal/protocol"
)

// forged returns n lines whose text marks them as a replay's rewrite.
func forged(n int) []protocol.LogLine {
	out := make([]protocol.LogLine, n)
	for i := range out {
		out[i].Text = "FORGED"
	}
	return out
}

// TestCraftedOffsetsNeverRewriteStoredLines replays chunks with crafted
// offsets against a log that holds lines 0..4: a negative offset, an
// overlap whose text differs from what is stored, offsets near the top of
// the int64 range (whose end overflows). No call rewrites or drops a
// stored line, an overflowing offset is refused, the acknowledged offset
// never goes backwards, and a correct replay afterwards stores nothing
// twice.
func TestCraftedOffsetsNeverRewriteStoredLines(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() Store) {
		s := open()
		if _, err := s.AppendFrom(runID, jobID, 0, 0, lines(0, 5)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AppendFrom(runID, jobID, 0, -3, forged(3)); err == nil {
			t.Fatal("negative offset accepted")
		}
		// Overlap: lines 2..4 are held, 5..6 are new; held text wins.
		res, err := s.AppendFrom(runID, jobID, 0, 2, append(forged(3), lines(5, 2)...))
		if err != nil || res.Stored != 2 || res.Duplicate != 3 || res.Acked != 7 {
			t.Fatalf("overlap: %+v %v", res, err)
		}
		if got := strings.Join(texts(t, s, 0), "|"); got != "line 0|line 1|line 2|line 3|line 4|line 5|line 6" {
			t.Fatalf("log after overlap = %s", got)
		}
		// The last line of this chunk would be numbered past MaxInt64.
		if res, err := s.AppendFrom(runID, jobID, 0, math.MaxInt64, lines(7, 2)); err == nil {
			t.Fatalf("offset overflowing int64 accepted: %+v", res)
		}
		// A jump far ahead is stored (a gap, counted missing) and pushes
		// the acknowledged offset forward, never backwards.
		far := int64(math.MaxInt64 - 10)
		res, err = s.AppendFrom(runID, jobID, 0, far, lines(7, 1))
		if err != nil || res.Stored != 1 || res.Acked != far+1 || res.Missing != far-7 {
			t.Fatalf("far offset: %+v %v", res, err)
		}
		// A replay of the beginning, through the same and a new instance
		// (a restart, another node), stores nothing and loses nothing.
		for _, st := range []Store{s, open()} {
			res, err = st.AppendFrom(runID, jobID, 0, 0, forged(8))
			if err != nil || res.Stored != 0 || res.Acked != far+1 {
				t.Fatalf("replay from 0: %+v %v", res, err)
			}
			got := strings.Join(texts(t, st, 0), "|")
			if got != "line 0|line 1|line 2|line 3|line 4|line 5|line 6|line 7" {
				t.Fatalf("log after replays = %s", got)
			}
		}
	})
}
