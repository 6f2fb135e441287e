// Package logstream turns a step's stdout/stderr into protocol.LogLine
// batches: line splitting, UTF-8 repair, secret masking, a per-step size cap
// and time/size-based flushing (KiCI LogStreamer,
// KiCI: Secret masking).
package logstream

import (
	"encoding/base64"
	"sort"
	"strings"
)

// MinSecretLen is the shortest secret value that is masked; shorter values
// would blank out ordinary text (KiCI log-masker.ts uses the same limit).
const MinSecretLen = 3

// Mask is the replacement written in place of a secret value.
const Mask = "***"

// Masker replaces secret values, and their standard base64 encodings, with
// Mask. The zero value and a nil *Masker mask nothing. A Masker is immutable
// and safe for concurrent use.
type Masker struct {
	r *strings.Replacer
}

// NewMasker returns a Masker for values. Values shorter than MinSecretLen are
// ignored. Each kept value is masked together with its standard base64 form
// (also of the value followed by a newline, as `echo value | base64` prints
// it), and each line of a multi-line value is masked on its own, since logs
// are masked line by line. Matching prefers the longest candidate at each
// position, so a secret that contains another secret is masked whole.
func NewMasker(values []string) *Masker {
	seen := map[string]bool{}
	var cands []string
	add := func(s string) {
		if len(s) >= MinSecretLen && !seen[s] {
			seen[s] = true
			cands = append(cands, s)
		}
	}
	for _, v := range values {
		if len(v) < MinSecretLen {
			continue
		}
		add(v)
		add(base64.StdEncoding.EncodeToString([]byte(v)))
		add(base64.StdEncoding.EncodeToString([]byte(v + "\n")))
		if strings.ContainsAny(v, "\r\n") {
			for _, line := range strings.Split(v, "\n") {
				line = strings.TrimSuffix(line, "\r")
				if len(line) >= MinSecretLen {
					add(line)
					add(base64.StdEncoding.EncodeToString([]byte(line)))
				}
			}
		}
	}
	if len(cands) == 0 {
		return &Masker{}
	}
	// strings.Replacer tries old strings in argument order at each position,
	// so longest first gives longest-match semantics.
	sort.SliceStable(cands, func(i, j int) bool { return len(cands[i]) > len(cands[j]) })
	pairs := make([]string, 0, 2*len(cands))
	for _, c := range cands {
		pairs = append(pairs, c, Mask)
	}
	return &Masker{r: strings.NewReplacer(pairs...)}
}

// Mask returns s with every secret occurrence replaced by Mask.
func (m *Masker) Mask(s string) string {
	if m == nil || m.r == nil {
		return s
	}
	return m.r.Replace(s)
}
