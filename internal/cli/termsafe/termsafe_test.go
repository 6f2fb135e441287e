package termsafe

import "testing"

func TestLine(t *testing.T) {
	cases := map[string]string{
		"plain text\twith tab":          "plain text\twith tab",
		"\x1b[31mred\x1b[0m":            "\x1b[31mred\x1b[0m",
		"\x1b]0;pwned title\x07":        "^[]0;pwned title^G",
		"\x1b[2Jcleared":                "^[[2Jcleared",
		"progress 10%\rprogress 100%":   "progress 10%^Mprogress 100%",
		"del\x7f":                       "del^?",
		"\x1b[1;32;40mok\x1b[m \x1b[5A": "\x1b[1;32;40mok\x1b[m ^[[5A",
	}
	for in, want := range cases {
		if got := Line(in); got != want {
			t.Errorf("Line(%q) = %q, want %q", in, got, want)
		}
	}
}

// Table cells carry text other people wrote (rejection reasons, comments,
// variable values): no escape sequence, colour or not, reaches the
// terminal, and a cell stays on one line.
func TestCell(t *testing.T) {
	for in, want := range map[string]string{
		"plain reason":       "plain reason",
		"line1\nline2":       "line1 line2",
		"\x1b[31mRED\x1b[0m": "^[[31mRED^[[0m",
		"over\rwrite\a":      "over^Mwrite^G",
		"tab\there":          "tab here",
		"\x1b]0;title\x07":   "^[]0;title^G",
		"unicode ✓ stays":    "unicode ✓ stays",
	} {
		if got := Cell(in); got != want {
			t.Errorf("Cell(%q) = %q, want %q", in, got, want)
		}
	}
}
