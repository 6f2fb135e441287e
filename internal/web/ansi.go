package web

import (
	"html/template"
	"strconv"
	"strings"

	"kici.dev/kici/internal/termtext"
)

// sgr is the display state set by ANSI SGR sequences (ECMA-48 §8.3.117):
// foreground and background as one of the 16 standard colours (-1 =
// default), bold, dim, italic, underline.
type sgr struct {
	fg, bg                 int
	bold, dim, ital, uline bool
}

var plain = sgr{fg: -1, bg: -1}

// classes returns the CSS classes of the state ("" for plain text).
func (s sgr) classes() string {
	var c []string
	if s.fg >= 0 {
		c = append(c, "a-f"+strconv.Itoa(s.fg))
	}
	if s.bg >= 0 {
		c = append(c, "a-b"+strconv.Itoa(s.bg))
	}
	if s.bold {
		c = append(c, "a-bold")
	}
	if s.dim {
		c = append(c, "a-dim")
	}
	if s.ital {
		c = append(c, "a-ital")
	}
	if s.uline {
		c = append(c, "a-ul")
	}
	return strings.Join(c, " ")
}

// apply folds the parameters of one SGR sequence into s. 256-colour and
// true-colour arguments (38/48;5;n and 38/48;2;r;g;b) map the 16 first
// palette entries and otherwise fall back to the default colour: the
// page's palette is fixed, never taken from the log.
func (s sgr) apply(params string) sgr {
	if params == "" {
		return plain
	}
	ps := strings.Split(params, ";")
	for i := 0; i < len(ps); i++ {
		n, err := strconv.Atoi(ps[i])
		if err != nil {
			continue
		}
		switch {
		case n == 0:
			s = plain
		case n == 1:
			s.bold = true
		case n == 2:
			s.dim = true
		case n == 3:
			s.ital = true
		case n == 4:
			s.uline = true
		case n == 22:
			s.bold, s.dim = false, false
		case n == 23:
			s.ital = false
		case n == 24:
			s.uline = false
		case n >= 30 && n <= 37:
			s.fg = n - 30
		case n >= 90 && n <= 97:
			s.fg = n - 90 + 8
		case n == 39:
			s.fg = -1
		case n >= 40 && n <= 47:
			s.bg = n - 40
		case n >= 100 && n <= 107:
			s.bg = n - 100 + 8
		case n == 49:
			s.bg = -1
		case n == 38 || n == 48:
			c := -1
			if i+2 < len(ps) && ps[i+1] == "5" {
				if v, err := strconv.Atoi(ps[i+2]); err == nil && v >= 0 && v < 16 {
					c = v
				}
				i += 2
			} else if i+4 < len(ps) && ps[i+1] == "2" {
				i += 4
			}
			if n == 38 {
				s.fg = c
			} else {
				s.bg = c
			}
		}
	}
	return s
}

// renderANSI turns one log line into HTML: text is escaped, SGR colour
// and style sequences become <span class="a-…"> (classes only, so the CSP
// needs no inline style), every other escape sequence and control
// character (but tab) is dropped, by termtext's grammar — the one the
// step-log masker skips, so the page never joins into a secret what the
// masker saw apart. Nothing in the line can produce markup.
func renderANSI(line string) template.HTML {
	var b strings.Builder
	cur := plain
	open := false
	var text strings.Builder
	flush := func() {
		if text.Len() == 0 {
			return
		}
		if !open && cur != plain {
			b.WriteString(`<span class="` + cur.classes() + `">`)
			open = true
		}
		b.WriteString(template.HTMLEscapeString(text.String()))
		text.Reset()
	}
	setState := func(ns sgr) {
		if ns == cur {
			return
		}
		flush()
		if open {
			b.WriteString("</span>")
			open = false
		}
		cur = ns
	}
	buf := []byte(line)
	for i := 0; i < len(buf); {
		n, _ := termtext.InvisibleLen(buf, i, true)
		if n == 0 {
			text.WriteByte(buf[i])
			i++
			continue
		}
		if seq := line[i : i+n]; n >= 3 && seq[1] == '[' && seq[n-1] == 'm' {
			setState(cur.apply(seq[2 : n-1]))
		}
		i += n
	}
	flush()
	if open {
		b.WriteString("</span>")
	}
	return template.HTML(b.String())
}
