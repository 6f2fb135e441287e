package provenance

import (
	"context"
	"strings"
	"testing"
)

// BenchmarkAttest measures signing one subject end to end on SQLite: store
// reads, token mint, DSSE signature, bundle insert.
func BenchmarkAttest(b *testing.B) {
	f := newFixture(b)
	runID, jobID := f.run(b, "bench", strings.Repeat("a", 40))
	in := []SubjectInput{{Name: "a", SHA256: digestOf("a")}}
	ctx := context.Background()
	for b.Loop() {
		if _, err := f.svc.Attest(ctx, runID, jobID, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerify measures Verify of one bundle against an in-memory key set.
func BenchmarkVerify(b *testing.B) {
	f := newFixture(b)
	runID, jobID := f.run(b, "bench", strings.Repeat("a", 40))
	atts, err := f.svc.Attest(context.Background(), runID, jobID, []SubjectInput{{Name: "a", SHA256: digestOf("a")}})
	if err != nil {
		b.Fatal(err)
	}
	ks, err := f.keys.KeySet(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if v := Verify(atts[0].Bundle, VerifyOptions{Issuer: issuer, Keys: ks}); !v.Verified {
			b.Fatal(v.Failures)
		}
	}
}
