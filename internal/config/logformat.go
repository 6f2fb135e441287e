package config

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// LogHandler returns the slog handler that KICI_LOG_FORMAT in environ
// selects, writing to w at level: "json" writes one JSON object per record
// (for log collectors), "text" or unset the key=value text format. Any
// other value is an error naming the accepted ones.
func LogHandler(environ []string, w io.Writer, level slog.Leveler) (slog.Handler, error) {
	format := ""
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "KICI_LOG_FORMAT="); ok {
			format = strings.TrimSpace(v)
		}
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(format) {
	case "", "text":
		return slog.NewTextHandler(w, opts), nil
	case "json":
		return slog.NewJSONHandler(w, opts), nil
	}
	return nil, fmt.Errorf("KICI_LOG_FORMAT=%q: want text or json", format)
}

// Fatal writes err, the reason program cannot start or go on, to w in the
// format KICI_LOG_FORMAT in environ selects: a JSON record (level ERROR,
// msg err, program, fatal) with json, else the plain line "program: err".
// A log collector reading JSON thus also gets the line that says why the
// process exited.
func Fatal(environ []string, w io.Writer, program string, err error) {
	if h, herr := LogHandler(environ, w, slog.LevelInfo); herr == nil {
		if _, isJSON := h.(*slog.JSONHandler); isJSON {
			slog.New(h).Error(err.Error(), "program", program, "fatal", true)
			return
		}
	}
	fmt.Fprintf(w, "%s: %v\n", program, err)
}
