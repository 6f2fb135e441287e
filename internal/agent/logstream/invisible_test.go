package logstream

import (
	"math/rand/v2"
	"strings"
	"testing"

	"kici.dev/kici/internal/termtext"
)

var visible = termtext.Visible

// A secret printed in pieces with an ANSI sequence or a carriage return
// between them (`printf '%s\033[0m%s' "${S:0:5}" "${S:5}"`) shows whole on
// a terminal and on the job page: it is masked, in one write or cut
// anywhere, and the text around it (escapes included) is kept as it was.
func TestSecretSplitByInvisibleSequencesIsMasked(t *testing.T) {
	const s = "s3cr3t-T0ken-value"
	m := NewMasker([]string{s})
	cases := map[string]string{
		"sgr reset":          s[:5] + "\x1b[0m" + s[5:],
		"colour and reset":   s[:3] + "\x1b[1;31m" + s[3:9] + "\x1b[0m" + s[9:],
		"carriage return":    s[:5] + "\r" + s[5:],
		"cursor movement":    s[:5] + "\x1b[2K\x1b[1G" + s[5:],
		"osc title (bel)":    s[:5] + "\x1b]0;title\x07" + s[5:],
		"osc hyperlink (st)": s[:5] + "\x1b]8;;http://x\x1b\\" + s[5:],
		"two-byte escape":    s[:5] + "\x1b(B" + s[5:],
		"backspace and del":  s[:2] + "\b" + s[2:7] + "\x7f" + s[7:],
		"every byte":         strings.Join(strings.Split(s, ""), "\x1b[0m"),
	}
	for name, printed := range cases {
		line := "before \x1b[32m" + printed + "\x1b[0m after"
		if !strings.Contains(visible(line), s) {
			t.Fatalf("%s: the case does not show the secret: %q", name, visible(line))
		}
		want := "before \x1b[32m***\x1b[0m after"
		if got := m.Mask(line); got != want {
			t.Errorf("%s: Mask = %q, want %q", name, got, want)
		}
		for _, size := range []int{1, 2, 3, 7} {
			got := strings.Join(collect(t, m, chunks(line+"\n", size)...), "\n")
			if got != want {
				t.Errorf("%s, writes of %d bytes: %q, want %q", name, size, got, want)
			}
		}
	}
	// Without a secret nothing changes, escapes and carriage returns
	// included.
	plain := "\x1b[1mbold\x1b[0m s3cr\x1b[0mX \x1b]0;t\x07 progress 10%\rprogress 20%\x1b"
	if got := m.Mask(plain); got != plain {
		t.Fatalf("text without a secret changed: %q", got)
	}
}

// However output mixing secrets, escapes and carriage returns is cut into
// writes, the stream gives the same lines as masking it whole, and no line
// shows a secret once escapes and control characters are dropped.
func TestStreamingRedactionAcrossEscapesMatchesWholeText(t *testing.T) {
	secrets := []string{"abcdef", "cdefgh", "xyz123", "token-ABC"}
	m := NewMasker(secrets)
	rng := rand.New(rand.NewPCG(3, 4))
	noise := []string{"\x1b[0m", "\x1b[1;32m", "\r", "\x1b]0;t\x07", "\x1b(B", "a", "c", "x", "-", " ", "\n"}
	for round := 0; round < 300; round++ {
		var b strings.Builder
		for b.Len() < 400 {
			switch rng.IntN(4) {
			case 0: // a secret with invisible runs between its bytes
				s := secrets[rng.IntN(len(secrets))]
				for k := 0; k < len(s); k++ {
					b.WriteByte(s[k])
					if k < len(s)-1 && rng.IntN(3) == 0 {
						b.WriteString(noise[rng.IntN(5)])
					}
				}
			default:
				b.WriteString(noise[rng.IntN(len(noise))])
			}
		}
		text := b.String() + "\n"
		writes := randomWrites(rng, text)
		want := strings.Split(strings.TrimSuffix(m.Mask(text), "\n"), "\n")
		for i := range want {
			want[i] = strings.TrimSuffix(want[i], "\r") // a line's own CR is dropped
		}
		got := collect(t, m, writes...)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("round %d: streamed\n%q\nwhole\n%q", round, got, want)
		}
		for _, l := range got {
			for _, s := range secrets {
				if strings.Contains(visible(l), s) {
					t.Fatalf("round %d: %q shows in %q", round, s, l)
				}
			}
		}
	}
}
