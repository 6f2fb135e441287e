package logstore

import (
	"fmt"
	"strings"
	"time"

	"kici.dev/kici/internal/protocol"
)

// DefaultStepLogMaxBytes is the per-step log size cap when
// KICI_STEP_LOG_MAX_BYTES is not set: 256 MiB of stored JSON Lines.
const DefaultStepLogMaxBytes = 256 << 20

// CapMarkerStream is the stream of the line that marks where a step's log
// was cut by the size cap.
const CapMarkerStream protocol.LogStream = "kici"

// CapMarkerPrefix starts the text of the size cap's marker line.
const CapMarkerPrefix = "[kici] log truncated:"

// capMarker is the line stored once when a step's agent output passes max
// bytes. The step goes on and its result is unchanged; only its output is
// no longer stored.
func capMarker(max int64) protocol.LogLine {
	return protocol.LogLine{Timestamp: time.Now().UnixMilli(), Stream: CapMarkerStream,
		Text: fmt.Sprintf("%s this step's log reached its size limit of %d bytes (KICI_STEP_LOG_MAX_BYTES); "+
			"later output of the step is not stored. The step keeps running and its result is not affected.", CapMarkerPrefix, max)}
}

// isCapMarker reports whether l is the size cap's marker line.
func isCapMarker(l *protocol.LogLine) bool {
	return l.Stream == CapMarkerStream && strings.HasPrefix(l.Text, CapMarkerPrefix)
}

// lineCost is the number of bytes a line counts against the size cap:
// its text and stream plus the JSON framing around them.
func lineCost(l *protocol.LogLine) int64 { return int64(len(l.Text)+len(l.Stream)) + 48 }

// applyCap cuts agent lines about to be stored to the size cap. size is
// what the step holds (bytes), capped whether its marker is stored. It
// returns the lines to store, the number dropped, and whether the marker
// must be appended after them (the first time the cap is passed).
func applyCap(max, size int64, capped bool, lines []protocol.LogLine) (keep []protocol.LogLine, dropped int, marker bool) {
	if max <= 0 {
		return lines, 0, false
	}
	if capped {
		return nil, len(lines), false
	}
	for i := range lines {
		size += lineCost(&lines[i])
		if size > max {
			return lines[:i], len(lines) - i, true
		}
	}
	return lines, 0, false
}
