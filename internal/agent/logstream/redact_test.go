package logstream

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"kici.dev/kici/internal/protocol"
)

// A secret that straddles the 64 KiB line cut is masked whole: the stored
// pieces never carry a part of it (it used to be stored as …SUPER +
// SECRETTOKEN123).
func TestSecretStraddlingTheLineSplit(t *testing.T) {
	const secret = "SUPERSECRETTOKEN123"
	m := NewMasker([]string{secret})
	for _, at := range []int{MaxLineBytes - 5, MaxLineBytes - 1, MaxLineBytes - len(secret) + 1} {
		line := strings.Repeat("x", at) + secret + strings.Repeat("y", 100)
		for name, writes := range map[string][]string{
			"one write":       {line + "\n"},
			"cut at the seam": {line[:MaxLineBytes], line[MaxLineBytes:] + "\n"},
			"4 KiB writes":    chunks(line+"\n", 4096),
		} {
			got := collect(t, m, writes...)
			joined := strings.Join(got, "")
			for _, piece := range []string{"SUPER", "SECRETTOKEN123", "TOKEN123", "SUPERSECRET"} {
				if strings.Contains(joined, piece) {
					t.Fatalf("at %d, %s: stored pieces contain %q", at, name, piece)
				}
			}
			if want := strings.Repeat("x", at) + Mask + strings.Repeat("y", 100); joined != want {
				t.Fatalf("at %d, %s: stored %d bytes, want %d", at, name, len(joined), len(want))
			}
			for _, l := range got {
				if len(l) > MaxLineBytes {
					t.Fatalf("piece of %d bytes exceeds the cut", len(l))
				}
			}
		}
	}
	// AddLine (agent-generated text) masks before cutting too.
	var lines []string
	s := New(Options{Masker: m, Flush: func(b []protocol.LogLine) {
		for _, l := range b {
			lines = append(lines, l.Text)
		}
	}})
	s.AddLine("", strings.Repeat("z", MaxLineBytes-3)+secret)
	s.Close()
	if j := strings.Join(lines, ""); strings.Contains(j, "SUPER") || !strings.HasSuffix(j, Mask) {
		t.Fatalf("AddLine across the cut: %q", j[len(j)-40:])
	}
}

func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

// Each encoded form a step is likely to print is masked.
func TestEncodedFormsAreMasked(t *testing.T) {
	secret := `p@ss "wörd"/&+=` + "\t" + `\end`
	m := NewMasker([]string{secret})
	js, _ := json.Marshal(secret)
	forms := map[string]string{
		"json":          string(js),
		"%q":            strconv.Quote(secret),
		"%+q":           strconv.QuoteToASCII(secret),
		"hex":           hex.EncodeToString([]byte(secret)),
		"HEX":           strings.ToUpper(hex.EncodeToString([]byte(secret))),
		"query escape":  url.QueryEscape(secret),
		"path escape":   url.PathEscape(secret),
		"base64":        base64.StdEncoding.EncodeToString([]byte(secret)),
		"base64url":     base64.URLEncoding.EncodeToString([]byte(secret)),
		"raw base64":    base64.RawStdEncoding.EncodeToString([]byte(secret)),
		"base64 echo":   base64.StdEncoding.EncodeToString([]byte(secret + "\n")),
		"printf %q":     fmt.Sprintf("%q", secret),
		"url in a link": "https://example.test/?token=" + url.QueryEscape(secret) + "&x=1",
	}
	for name, text := range forms {
		got := strings.Join(collect(t, m, "value: "+text+"\n"), "\n")
		if !strings.Contains(got, Mask) {
			t.Errorf("%s: %q not masked: %q", name, text, got)
		}
		for _, part := range []string{"wörd", "w\\u00f6rd", "w\\xc3\\xb6rd", "77c3b672", "w%C3%B6rd", "p@ss"} {
			if strings.Contains(got, part) {
				t.Errorf("%s: stored %q still contains %q", name, got, part)
			}
		}
	}
}

// Streaming redaction gives the same text as masking the whole output at
// once, however the output is cut into writes, and never lets a secret or a
// secret form through, also with overlapping secrets.
func TestStreamingRedactionMatchesWholeText(t *testing.T) {
	secrets := []string{"abcdef", "cdefgh", "xyz123", "token-ABC", "ABC-tail"}
	m := NewMasker(secrets)
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := "abcdefghxyz123-ABCtoken il\n"
	for round := 0; round < 300; round++ {
		var b strings.Builder
		for b.Len() < 400 {
			if rng.IntN(4) == 0 {
				b.WriteString(secrets[rng.IntN(len(secrets))])
			} else {
				b.WriteByte(alphabet[rng.IntN(len(alphabet))])
			}
		}
		text := b.String() + "\n"
		writes := randomWrites(rng, text)
		want := strings.Split(strings.TrimSuffix(m.Mask(text), "\n"), "\n")
		got := collect(t, m, writes...)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("round %d: streamed\n%q\nwhole\n%q", round, got, want)
		}
		for _, l := range got {
			for _, s := range secrets {
				if strings.Contains(l, s) {
					t.Fatalf("round %d: %q leaked in %q", round, s, l)
				}
			}
		}
	}
}

// randomWrites cuts text into writes of 1 to 9 bytes.
func randomWrites(rng *rand.Rand, text string) []string {
	var writes []string
	for rest := text; rest != ""; {
		n := min(len(rest), 1+rng.IntN(9))
		writes = append(writes, rest[:n])
		rest = rest[n:]
	}
	return writes
}

func BenchmarkMaskStream(b *testing.B) {
	secrets := []string{"ghp_0123456789abcdefghijklmnopqrstuvwxyz", "s3cr3t-T0ken-value", "postgres://u:pw@db/x"}
	line := []byte("2026-12-02T01:02:03Z INFO compiling package kici.dev/kici/internal/thing ok 0.123s\n")
	for _, tc := range []struct {
		name string
		m    *Masker
	}{{"no-secrets", NewMasker(nil)}, {"3-secrets", NewMasker(secrets)}} {
		b.Run(tc.name, func(b *testing.B) {
			s := New(Options{Masker: tc.m, FlushLines: 1000, Flush: func([]protocol.LogLine) {}})
			w := s.Writer(Stdout)
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := w.Write(line); err != nil {
					b.Fatal(err)
				}
			}
			s.Close()
		})
	}
}
