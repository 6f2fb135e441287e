package ingest

import (
	"strings"
	"testing"

	"kici.dev/kici/internal/approval/hold"
)

// A `/kici approve` comment that satisfies the last clause is answered
// "it runs now": the decider reports such a decision as released.
func TestDecisionReplySaysWhatTheDecisionDid(t *testing.T) {
	for st, want := range map[hold.Status]string{
		hold.Released: "approved by @alice; it runs now.",
		hold.Approved: "approved by @alice; it runs now.",
		hold.Rejected: "rejected by @alice; its held jobs are cancelled.",
		hold.Pending:  "the hold is pending (it waits for further approvals).",
	} {
		if got := decisionReply("approve", "r1", "alice", st); !strings.HasSuffix(got, want) {
			t.Errorf("%s: %q, want it to end %q", st, got, want)
		}
	}
}
