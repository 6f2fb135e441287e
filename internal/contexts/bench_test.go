package contexts

import (
	"context"
	"fmt"
	"testing"

	"kici.dev/kici/internal/store"
)

// BenchmarkDispatchDecision measures the per-job engine work at dispatch:
// resolving three names among 200 contexts (one through a glob), the hard
// gates, aggregation and evaluation. Target: well under 100 µs per job.
func BenchmarkDispatchDecision(b *testing.B) {
	l := &fakeLookup{}
	for i := range 190 {
		c := fixed(fmt.Sprintf("ctx-%03d", i))
		c.BranchRestrictions = []string{"main", "release/*"}
		c.RepoPatterns = []string{"acme/*"}
		l.ctxs = append(l.ctxs, c)
	}
	for i := range 10 {
		l.ctxs = append(l.ctxs, globCtx(fmt.Sprintf("glob-%d", i), fmt.Sprintf("deploy-%d-*", i)))
	}
	l.ctxs[5].RequiredReviewers = []string{"alice", "bob"}
	facts := RunFacts{OrgID: "o1", Repo: "acme/app", TriggerType: "push", TargetBranch: "main", TrustTier: store.TrustTrusted}
	names := []string{"ctx-005", "ctx-100", "deploy-3-eu"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		bound, _, err := Resolve(ctx, l, "o1", names)
		if err != nil || len(bound) != 3 {
			b.Fatalf("bound %d, %v", len(bound), err)
		}
		if rej := CheckGates(facts, bound); rej != nil {
			b.Fatal(rej)
		}
		if d := Evaluate(Aggregate(bound), facts, Done{ReviewersApproved: true}); d.Verdict != Pass {
			b.Fatalf("%+v", d)
		}
	}
}
