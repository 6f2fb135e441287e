package logstream

import "kici.dev/kici/internal/termtext"

// A terminal, and the web UI's log renderer, show nothing for ANSI escape
// sequences and control characters: `printf '%s\033[0m%s' "${S:0:5}"
// "${S:5}"` or a carriage return in the middle of a secret still shows the
// whole secret. The masker therefore lets such invisible runs
// (termtext.InvisibleLen) sit between the bytes of a needle (never before
// its first or after its last byte) and masks the whole span, escapes
// included.

// matchAt matches needle n at buf[i] (buf[i] == n[0] is the caller's
// check), letting invisible runs sit between its bytes. It returns the end
// of the match, or partial when buf ends before n does (and !final), or
// end -1 when n does not match here. The common case, a plain mismatch,
// costs one byte comparison loop; invisible runs are parsed only where a
// byte that may start one interrupts a match.
func matchAt(buf []byte, i int, n string, final bool) (end int, partial bool) {
	rest := buf[i:]
	if len(rest) >= len(n) && string(rest[:len(n)]) == n {
		return i + len(n), false // the plain match, one memory compare
	}
	k := 1 // buf[i] == n[0]
	for k < len(n) && k < len(rest) && rest[k] == n[k] {
		k++
	}
	switch {
	case k == len(n):
		return i + k, false
	case k == len(rest):
		return -1, !final
	case k == 0 || !mayHide(rest[k]):
		return -1, false
	}
	j := i + k
	for k < len(n) {
		if j >= len(buf) {
			return -1, !final
		}
		if buf[j] == n[k] {
			j++
			k++
			continue
		}
		l, more := termtext.InvisibleLen(buf, j, final)
		if more {
			return -1, true
		}
		if l == 0 {
			return -1, false
		}
		j += l
	}
	return j, false
}

// mayHide reports whether c can start an invisible run (a control
// character other than tab and newline, ESC included, or DEL).
func mayHide(c byte) bool { return c < 0x20 && c != '\t' && c != '\n' || c == 0x7f }
