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
