package decisiontrace

import (
	"bytes"
	"testing"

	"kici.dev/kici/internal/api/apitypes"
)

// A matched and a skipped workflow print as blocks with one line per check;
// an empty pattern drops "vs", an empty reason drops the dash, and a value
// from a payload can neither send escape sequences nor add a line.
func TestPrint(t *testing.T) {
	var b bytes.Buffer
	Print(&b, []apitypes.Decision{
		{Name: "ci", Matched: true, Summary: "Matched trigger 1 (push)", Checks: []apitypes.Check{
			{Check: "event type", Pattern: "push", Value: "push", Passed: true},
			{Check: "branch", Value: "main", Passed: true, Reason: "no filter"},
		}},
		{Name: "nightly", Summary: "No triggers matched", Checks: []apitypes.Check{
			{Check: "event type", Pattern: "tag", Value: "push", Reason: "event type differs"},
			{Check: "comment body", Pattern: "/deploy*", Value: "hi\x1b]0;title\x07\nthere", Reason: "no match"},
		}},
	})
	want := `
RUN  ci: Matched trigger 1 (push)
    [pass] event type: push vs push
    [pass] branch: main — no filter

SKIP nightly: No triggers matched
    [FAIL] event type: push vs tag — event type differs
    [FAIL] comment body: hi^[]0;title^G there vs /deploy* — no match
`
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
