package config

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

func TestLogHandlerFormats(t *testing.T) {
	var buf bytes.Buffer
	h, err := LogHandler([]string{"KICI_LOG_FORMAT=json"}, &buf, slog.LevelInfo)
	if err != nil {
		t.Fatal(err)
	}
	slog.New(h).Info("job dispatched", "job", "j1")
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil || rec["msg"] != "job dispatched" || rec["job"] != "j1" {
		t.Fatalf("json record %q: %v", buf.String(), err)
	}
	buf.Reset()
	h, err = LogHandler(nil, &buf, slog.LevelInfo)
	if err != nil {
		t.Fatal(err)
	}
	slog.New(h).Info("job dispatched", "job", "j1")
	if !strings.Contains(buf.String(), `msg="job dispatched" job=j1`) {
		t.Fatalf("text record %q", buf.String())
	}
	if _, err := LogHandler([]string{"KICI_LOG_FORMAT=xml"}, &buf, slog.LevelInfo); err == nil || !strings.Contains(err.Error(), "want text or json") {
		t.Fatalf("bad format: %v", err)
	}
}
