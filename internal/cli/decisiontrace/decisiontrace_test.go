package decisiontrace

import (
	"bytes"
	"testing"

	"kici.dev/kici/internal/api/apitypes"
)

// A matched and a skipped workflow print as blocks with one line per check;
// an empty pattern drops "vs" and an empty reason drops the dash.
func TestPrint(t *testing.T) {
	var b bytes.Buffer
	Print(&b, []apitypes.Decision{
		{Name: "ci", Matched: true, Summary: "Matched trigger 1 (push)", Checks: []apitypes.Check{
			{Check: "event type", Pattern: "push", Value: "push", Passed: true},
			{Check: "branch", Value: "main", Passed: true, Reason: "no filter"},
		}},
		{Name: "nightly", Summary: "No triggers matched", Checks: []apitypes.Check{
			{Check: "event type", Pattern: "tag", Value: "push", Reason: "event type differs"},
		}},
	})
	want := `
RUN  ci: Matched trigger 1 (push)
    [pass] event type: push vs push
    [pass] branch: main — no filter

SKIP nightly: No triggers matched
    [FAIL] event type: push vs tag — event type differs
`
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
