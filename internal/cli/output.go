package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"kici.dev/kici/internal/cli/termsafe"
)

// table writes aligned columns; call flush when done.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, headers ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(headers...)
	return t
}

func (t *table) row(cols ...string) {
	for i, c := range cols {
		cols[i] = termsafe.Cell(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cols, "\t"))
}

func (t *table) flush() { _ = t.tw.Flush() }

// printJSON writes raw JSON indented (falls back to the raw bytes).
func printJSON(w io.Writer, raw []byte) {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		_, _ = w.Write(raw) // terminal output, as fmt.Fprint: nowhere to report a failed write
		return
	}
	buf.WriteByte('\n')
	_, _ = w.Write(buf.Bytes())
}

// printValue writes v as indented JSON.
func printValue(w io.Writer, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	_, _ = w.Write(append(b, '\n'))
}

// fmtTime formats a timestamp in local time, "-" when nil.
func fmtTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// fmtMs formats a millisecond duration ("850ms", "4.2s", "3m05s", "1h02m"),
// "-" when nil.
func fmtMs(ms *int64) string {
	if ms == nil {
		return "-"
	}
	return fmtDuration(time.Duration(*ms) * time.Millisecond)
}

func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

// short returns the first n characters of s.
func short(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// deref returns *s or "-".
func deref(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}
