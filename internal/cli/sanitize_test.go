package cli

import "testing"

func TestTerminalSafe(t *testing.T) {
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
		if got := terminalSafe(in); got != want {
			t.Errorf("terminalSafe(%q) = %q, want %q", in, got, want)
		}
	}
}
