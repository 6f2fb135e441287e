package web

import (
	"fmt"

	"github.com/dustin/go-humanize"
	"html/template"
	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/runs/status"
	"strings"
	"time"
)

var funcs = template.FuncMap{
	"dur":    fmtDur,
	"durp":   func(ms *int64) string { return fmtDurPtr(ms) },
	"jobdur": jobDur,
	"ago":    func(t time.Time) string { return fmtAgo(t, time.Now()) },
	"bytes":  func(n int64) string { return humanize.IBytes(uint64(max(n, 0))) },
	"ts":     fmtTime,
	"tsp":    func(t *time.Time) string { return fmtTimePtr(t) },
	"short":  shortSHA,
	"ansi":   renderANSI,
	"trunc":  truncate,
	"add":    func(a, b int) int { return a + b },
	"comma":  func(n int) string { return humanize.Comma(int64(n)) },
	"branch": branchOf,
	"join":   strings.Join,
	// decideForm is the data of the "decide" template: a hold's approve
	// and reject form, back = "run" to return to the run page.
	"decideForm": func(id, csrf, back string) decideFormData { return decideFormData{ID: id, CSRF: csrf, Back: back} },
	"holdReason": holdReason,
	// statusCls takes any status type (run, job, step) or a plain word.
	"statusCls": func(s any) string { return "st-" + cssWord(fmt.Sprint(s)) },
}

// fmtDur formats milliseconds as "850ms", "12.3s", "4m 05s", "2h 03m".
func fmtDur(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", ms)
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
}

// jobDur is the duration shown for a job: "skipped" for a skipped job
// (which never ran, so its recorded 0ms would mislead), else fmtDurPtr.
func jobDur(st status.Job, ms *int64) string {
	if st == status.JobSkipped {
		return "skipped"
	}
	return fmtDurPtr(ms)
}

// fmtAgo formats t relative to now, as "3 minutes ago"; the zero time is "".
func fmtAgo(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	return humanize.RelTime(t, now, "ago", "from now")
}

func fmtDurPtr(ms *int64) string {
	if ms == nil {
		return ""
	}
	return fmtDur(*ms)
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return fmtTime(*t)
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// truncate shortens s to n runes with an ellipsis.
func truncate(n int, s string) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// branchOf names the branch of a ref (refs/heads/x → x), else the ref.
func branchOf(ref string) string {
	return strings.TrimPrefix(ref, "refs/heads/")
}

// cssWord keeps [a-z0-9_-] of a status so it can be a class name.
func cssWord(s string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(s) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// decideFormData is one hold's decision form: the hold, the session's
// CSRF token and where the decision returns to ("" = held runs page).
type decideFormData struct {
	ID, CSRF, Back string
}

// holdReasons say what a security hold's stored reason code means.
var holdReasons = map[hold.Reason]string{
	hold.ReasonForkPR:       "pull request from a fork",
	hold.ReasonContextTrust: "the context requires a trusted change",
}

// holdReason is a hold's reason for a reader: a stored code is explained
// and kept in parentheses ("pull request from a fork (fork_pr)"); a
// sentence is shown as it is.
func holdReason(r hold.Reason) string {
	if t, ok := holdReasons[r]; ok {
		return t + " (" + string(r) + ")"
	}
	return string(r)
}
