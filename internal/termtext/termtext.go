// Package termtext says which bytes of a log line a terminal shows: ANSI
// escape sequences and control characters are invisible. The step-log
// masker (internal/agent/logstream) and the web UI's renderer
// (internal/web/ansi.go; static/live.js mirrors it) share this grammar, so
// a secret the renderer would show whole is one the masker finds.
//
// The grammar is ECMA-48's:
//
//   - CSI: ESC '[', parameter bytes 0x30–0x3F, intermediate bytes
//     0x20–0x2F, then one final byte (whatever it is);
//   - OSC: ESC ']' up to BEL or ESC '\' (ST), both included, at most
//     MaxInvisible bytes (a longer one is ESC ']' alone, its body shown);
//   - any other escape: ESC, intermediate bytes 0x20–0x2F, one final
//     byte (ESC ( B is three bytes, ESC 7 two; ECMA-35);
//   - a control character other than tab and newline, and DEL: one byte.
//
// A newline ends any sequence: logs are rendered line by line.
package termtext

// MaxInvisible bounds one OSC sequence, so a stream never holds back more
// than this many bytes waiting for one to end.
const MaxInvisible = 4096

// InvisibleLen returns the length of the invisible run starting at
// buf[j], 0 when buf[j] is shown. more reports that buf ends inside the
// run and more input may lengthen it (never when final: buf is all there
// is, as for a stored line).
func InvisibleLen(buf []byte, j int, final bool) (n int, more bool) {
	c := buf[j]
	if c != 0x1b {
		if c < 0x20 && c != '\t' && c != '\n' || c == 0x7f {
			return 1, false
		}
		return 0, false
	}
	end := len(buf)
	if j+1 >= end {
		return 1, !final
	}
	k := j + 2
	switch buf[j+1] {
	case '\n':
		return 1, false
	case '[':
		for k < end && buf[k] >= 0x30 && buf[k] <= 0x3f {
			k++
		}
		for k < end && buf[k] >= 0x20 && buf[k] <= 0x2f {
			k++
		}
		if k >= end {
			return k - j, !final
		}
		if buf[k] == '\n' {
			return k - j, false
		}
		return k + 1 - j, false
	case ']':
		for ; k < end && k-j < MaxInvisible; k++ {
			switch {
			case buf[k] == '\n':
				return k - j, false
			case buf[k] == 0x07:
				return k + 1 - j, false
			case buf[k] == 0x1b && k+1 < end && buf[k+1] == '\\':
				return k + 2 - j, false
			}
		}
		if k-j >= MaxInvisible {
			return 2, false
		}
		return k - j, !final
	}
	k = j + 1
	for k < end && buf[k] >= 0x20 && buf[k] <= 0x2f {
		k++
	}
	switch {
	case k >= end:
		return k - j, !final
	case buf[k] == '\n':
		return k - j, false
	}
	return k + 1 - j, false
}

// Visible returns what a terminal shows of one line: s without its
// invisible runs.
func Visible(s string) string {
	in, b := []byte(s), make([]byte, 0, len(s))
	for i := 0; i < len(in); {
		if n, _ := InvisibleLen(in, i, true); n > 0 {
			i += n
			continue
		}
		b = append(b, s[i])
		i++
	}
	return string(b)
}
