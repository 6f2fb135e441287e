package logstream

import (
	"encoding/base64"
	"strings"
	"sync"
	"testing"

	"kici.dev/kici/internal/protocol"
)

// collect runs writes through a Stream's stdout Writer with masker and
// returns the text of every flushed line.
func collect(t *testing.T, m *Masker, writes ...string) []string {
	t.Helper()
	var mu sync.Mutex
	var lines []string
	s := New(Options{Masker: m, Flush: func(b []protocol.LogLine) {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range b {
			lines = append(lines, l.Text)
		}
	}})
	w := s.Writer(Stdout)
	for _, p := range writes {
		if _, err := w.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	mu.Lock()
	defer mu.Unlock()
	return lines
}

func TestSecretsNeverLeaveTheStream(t *testing.T) {
	const secret = "s3cr3t-T0ken-value"
	multi := "-----BEGIN KEY-----\nMIIEvQIBADANBgkq\nhkiG9w0BAQEFAASC\n-----END KEY-----"
	m := NewMasker([]string{secret, multi})
	b64 := base64.StdEncoding.EncodeToString([]byte(secret))
	b64nl := base64.StdEncoding.EncodeToString([]byte(secret + "\n"))
	cases := map[string][]string{
		"plain":                  {"token=" + secret + "\n"},
		"base64":                 {b64 + "\n"},
		"base64 of echo output":  {b64nl + "\n"},
		"split across writes":    {"tok", "en=s3cr", "3t-T0k", "en-value", " done\n"},
		"split byte by byte":     strings.Split("x="+secret+"\n", ""),
		"multi-line value":       {multi + "\n"},
		"multi-line in pieces":   {"MIIEvQ", "IBADANBgkq\nhkiG9w0B", "AQEFAASC\n"},
		"unterminated last line": {"last " + secret},
		"crlf":                   {secret + "\r\n"},
	}
	for name, writes := range cases {
		out := strings.Join(collect(t, m, writes...), "\n")
		for _, leak := range []string{secret, b64, b64nl, "MIIEvQIBADANBgkq", "hkiG9w0BAQEFAASC"} {
			if strings.Contains(out, leak) {
				t.Errorf("%s: output %q contains %q", name, out, leak)
			}
		}
		if !strings.Contains(out, Mask) {
			t.Errorf("%s: nothing masked in %q", name, out)
		}
	}
	// Ordinary text around a secret survives.
	if got := collect(t, m, "before "+secret+" after\n"); len(got) != 1 || got[0] != "before *** after" {
		t.Fatalf("surrounding text: %q", got)
	}
	// Lines of a multi-line value shorter than MinSecretLen are not masked
	// (they would blank out ordinary text).
	if got := NewMasker([]string{"ab\nlong-line-here"}).Mask("ab long-line-here"); got != "ab ***" {
		t.Fatalf("short line: %q", got)
	}
}
