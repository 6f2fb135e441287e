package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/cli/termsafe"
)

// printJobOutputs lists the outputs each job exported, after the jobs
// table: one "  name = value" line per output, multi-line values indented
// under it, control characters in caret notation (the values come from
// untrusted steps).
func printJobOutputs(w io.Writer, jobs []apitypes.JobView) {
	for _, j := range jobs {
		if len(j.Outputs) == 0 {
			continue
		}
		fmt.Fprintf(w, "\noutputs of %s:\n", termsafe.Cell(j.JobName))
		names := make([]string, 0, len(j.Outputs))
		for k := range j.Outputs {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			lines := strings.Split(j.Outputs[k], "\n")
			for i, l := range lines {
				lines[i] = termsafe.Cell(l)
			}
			fmt.Fprintf(w, "  %s = %s\n", termsafe.Cell(k), strings.Join(lines, "\n    "))
		}
	}
}
