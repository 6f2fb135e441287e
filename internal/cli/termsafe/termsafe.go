// Package termsafe makes text others wrote safe to print on an operator's
// terminal: control characters are shown in caret notation instead of
// being interpreted. It is shared by the admin client and the trace printer
// that kici preview also links.
package termsafe

import (
	"regexp"
	"strings"
)

// sgrRE matches an ANSI "select graphic rendition" sequence (colours, bold):
// the only escape sequence log output may pass to the terminal.
var sgrRE = regexp.MustCompile(`^\x1b\[[0-9;]{0,32}m`)

// Line makes a log line safe to print on an operator's terminal:
// colour sequences are kept, every other control character (cursor moves,
// screen clears, window-title OSC sequences, carriage returns, bells) is
// shown in caret notation (^[, ^M, ^G) instead of being interpreted. Step
// output is untrusted: it must not be able to rewrite what the operator sees.
func Line(s string) string { return caretControls(s, true) }

// Cell makes a table cell safe and single-line: tabs and newlines
// become spaces and every other control character, escape sequences
// included, is shown in caret notation. Cells carry names, reasons and
// values others wrote (a rejection reason, a pull-request comment, a
// variable): unlike log lines, they keep no colours.
func Cell(s string) string {
	return caretControls(strings.NewReplacer("\t", " ", "\n", " ").Replace(s), false)
}

// caretControls shows every control character of s but tab in caret
// notation, keeping ANSI colour sequences when keepSGR is set.
func caretControls(s string, keepSGR bool) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if keepSGR && c == 0x1b {
			if m := sgrRE.FindString(s[i:]); m != "" {
				b.WriteString(m)
				i += len(m)
				continue
			}
		}
		if isControl(rune(c)) {
			b.WriteByte('^')
			b.WriteByte(c ^ 0x40)
		} else {
			b.WriteByte(c)
		}
		i++
	}
	return b.String()
}

func isControl(r rune) bool { return (r < 0x20 && r != '\t') || r == 0x7f }
