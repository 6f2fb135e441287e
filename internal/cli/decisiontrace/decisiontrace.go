// Package decisiontrace renders trigger decisions for a terminal: the one
// layout `kici preview` and `kici-admin event-log show` share, so that a
// trace reads the same before a push and after a delivery. It depends on
// apitypes and termsafe alone, so the admin client can link it.
package decisiontrace

import (
	"fmt"
	"io"
	"strings"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/cli/termsafe"
)

// Print writes each decision as a block after a blank line: "RUN " or
// "SKIP", the workflow name and its summary, then one indented line per
// check, "[pass]" or "[FAIL]", what was compared, the event's value, the
// pattern after "vs" and the reason after a dash. Words rather than
// symbols keep the output readable in any terminal and easy to grep. Every
// field goes through termsafe.Cell: values come from webhook payloads
// (a comment body, a branch name) and must neither move the cursor nor
// break a check onto two lines.
func Print(w io.Writer, decisions []apitypes.Decision) {
	for _, d := range decisions {
		verdict := "SKIP"
		if d.Matched {
			verdict = "RUN "
		}
		fmt.Fprintf(w, "\n%s %s: %s\n", verdict, termsafe.Cell(d.Name), termsafe.Cell(d.Summary))
		for _, c := range d.Checks {
			status := "pass"
			if !c.Passed {
				status = "FAIL"
			}
			line := fmt.Sprintf("    [%s] %s: %s", status, termsafe.Cell(c.Check), termsafe.Cell(c.Value))
			if c.Pattern != "" {
				line += " vs " + termsafe.Cell(c.Pattern)
			}
			if c.Reason != "" {
				line += " — " + termsafe.Cell(c.Reason)
			}
			fmt.Fprintln(w, strings.TrimRight(line, " "))
		}
	}
}
