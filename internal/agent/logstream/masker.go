// Package logstream turns a step's output into protocol.LogLine batches:
// stream-level secret redaction, line splitting, UTF-8 repair, a per-step
// size cap and time/size-based flushing (see
// docs/kici-compatibility.md#agent).
package logstream

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// MinSecretLen is the shortest secret value that is masked; shorter values
// would blank out ordinary text (KiCI log-masker.ts uses the same limit).
const MinSecretLen = 3

// Mask is the replacement written in place of a secret value.
const Mask = "***"

// Masker finds secret values, and the forms a step is likely to print them
// in, and replaces each with Mask. The zero value and a nil *Masker mask
// nothing. A Masker is immutable and safe for concurrent use; the streaming
// state lives in the caller (see Stream's writers).
type Masker struct {
	// byFirst holds the needles by their first byte, longest first, so a
	// scan only compares needles that can start at a position.
	byFirst [256][]string
	n       int
}

// Forms returns the strings masked for one secret value: the value itself;
// its standard, URL-safe and unpadded base64 forms (also of the value
// followed by a newline, as `echo value | base64` prints it); its JSON
// string escaping and Go %q quoting (without the quotes); lower- and
// upper-case hex; and its query and path URL encodings. Forms shorter than
// MinSecretLen and duplicates are left out.
func Forms(v string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		if len(s) >= MinSecretLen && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	if len(v) < MinSecretLen {
		return nil
	}
	add(v)
	for _, b := range []string{v, v + "\n"} {
		add(base64.StdEncoding.EncodeToString([]byte(b)))
		add(base64.URLEncoding.EncodeToString([]byte(b)))
		add(base64.RawStdEncoding.EncodeToString([]byte(b)))
		add(base64.RawURLEncoding.EncodeToString([]byte(b)))
	}
	if j, err := json.Marshal(v); err == nil {
		add(string(j[1 : len(j)-1]))
	}
	var jb bytes.Buffer // JSON without HTML escaping, as most encoders print it
	enc := json.NewEncoder(&jb)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) == nil {
		s := strings.TrimSuffix(jb.String(), "\n")
		add(s[1 : len(s)-1])
	}
	q := strconv.Quote(v)
	add(q[1 : len(q)-1])
	qa := strconv.QuoteToASCII(v)
	add(qa[1 : len(qa)-1])
	h := hex.EncodeToString([]byte(v))
	add(h)
	add(strings.ToUpper(h))
	add(url.QueryEscape(v))
	add(url.PathEscape(v))
	return out
}

// NewMasker returns a Masker for values. Values shorter than MinSecretLen are
// ignored. Each kept value is masked in all its Forms, and each line of a
// multi-line value is also masked on its own (a step may print one line of a
// key). Overlapping matches are masked as one region, so a secret that
// contains another secret, or two secrets that overlap, leave nothing
// behind.
func NewMasker(values []string) *Masker {
	m := &Masker{}
	seen := map[string]bool{}
	add := func(s string) {
		for _, f := range Forms(s) {
			if !seen[f] {
				seen[f] = true
				m.byFirst[f[0]] = append(m.byFirst[f[0]], f)
				m.n++
			}
		}
	}
	for _, v := range values {
		add(v)
		if strings.ContainsAny(v, "\r\n") {
			for _, line := range strings.Split(v, "\n") {
				add(strings.TrimSuffix(line, "\r"))
			}
		}
	}
	for i := range m.byFirst {
		sort.SliceStable(m.byFirst[i], func(a, b int) bool { return len(m.byFirst[i][a]) > len(m.byFirst[i][b]) })
	}
	return m
}

// Empty reports whether the masker masks nothing.
func (m *Masker) Empty() bool { return m == nil || m.n == 0 }

// Mask returns s with every secret occurrence replaced by Mask.
func (m *Masker) Mask(s string) string {
	if m.Empty() {
		return s
	}
	out, _ := m.redact(nil, []byte(s), true)
	return string(out)
}

// redact appends the redacted form of buf to dst and reports how many bytes
// of buf it consumed. A needle matches across invisible runs (escape
// sequences, carriage returns and other control characters; invisible.go)
// and the whole span is masked. Unless final, it stops before the earliest position
// where a needle could still start but buf ends first (a partial match the
// next write may complete), so the caller keeps buf[consumed:] and prepends
// it to the next write: this is what keeps a secret split across writes,
// or across the line split, from leaking. A region covered by overlapping
// matches becomes one Mask (adjacent ones stay separate, so the result does
// not depend on how the output was cut into writes).
func (m *Masker) redact(dst, buf []byte, final bool) ([]byte, int) {
	if m.Empty() {
		return append(dst, buf...), len(buf)
	}
	limit := len(buf)  // buf[:limit] holds no partial match
	emitted := 0       // buf[:emitted] is already in dst
	from, to := -1, -1 // the open masked region
	// flush writes the open region, if it lies before limit, and reports
	// whether scanning may go on.
	flush := func() bool {
		if from < 0 {
			return true
		}
		if to > limit {
			// The region reaches into a held-back partial match, which may
			// still grow it: hold the whole region back, mask it next time.
			limit = from
			return false
		}
		dst = append(dst, buf[emitted:from]...)
		dst = append(dst, Mask...)
		emitted, from, to = to, -1, -1
		return true
	}
	for i := 0; i < len(buf); i++ {
		if i >= limit && from < 0 {
			break // nothing from here on can be emitted yet
		}
		cands := m.byFirst[buf[i]]
		if len(cands) == 0 {
			continue
		}
		for _, n := range cands { // longest first
			end, partial := matchAt(buf, i, n, final)
			if partial {
				limit = min(limit, i)
				continue
			}
			if end < 0 {
				continue
			}
			if from >= 0 && i < to {
				to = max(to, end) // overlapping: one region
			} else {
				if !flush() {
					return m.tail(dst, buf, emitted, limit)
				}
				from, to = i, end
			}
			break
		}
	}
	flush()
	return m.tail(dst, buf, emitted, limit)
}

// tail appends buf[emitted:limit] to dst (the clean text before the held-back
// part) and reports the consumed length.
func (m *Masker) tail(dst, buf []byte, emitted, limit int) ([]byte, int) {
	if emitted < limit {
		dst = append(dst, buf[emitted:limit]...)
		emitted = limit
	}
	return dst, emitted
}
