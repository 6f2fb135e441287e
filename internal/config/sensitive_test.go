package config

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSensitiveEnv(t *testing.T) {
	got := SensitiveEnv([]string{"KICI_BOOTSTRAP_ADMIN_TOKEN=kadm", "KICI_SECRET_KEY=k", "KICI_SECRET_KEY_FILE_OLD=/f",
		"KICI_DATABASE_URL=postgres://u:p@h/d", "KICI_PORT=4000", "KICI_DATA_DIR=/d", "GITHUB_TOKEN=x", "KICI_LOG_LEVEL=info", "NOEQUALS"})
	want := []string{"KICI_BOOTSTRAP_ADMIN_TOKEN", "KICI_SECRET_KEY", "KICI_SECRET_KEY_FILE_OLD", "KICI_DATABASE_URL"}
	if !slices.Equal(got, want) {
		t.Fatalf("SensitiveEnv = %v, want %v", got, want)
	}
}

func TestWorkDir(t *testing.T) {
	data := t.TempDir()
	c, err := Load([]string{"KICI_DATA_DIR=" + data})
	if err != nil || c.WorkDir != "" {
		t.Fatalf("default: WorkDir %q err %v, want empty (scaler default)", c.WorkDir, err)
	}
	other := filepath.Join(t.TempDir(), "w")
	c, err = Load([]string{"KICI_DATA_DIR=" + data, "KICI_WORK_DIR=" + other + "/"})
	if err != nil || c.WorkDir != other {
		t.Fatalf("WorkDir %q err %v, want %q", c.WorkDir, err, other)
	}
	for _, bad := range []string{"relative/dir", filepath.Join(data, "work"), data, filepath.Join(data, "a", "..", "b")} {
		if _, err := Load([]string{"KICI_DATA_DIR=" + data, "KICI_WORK_DIR=" + bad}); err == nil || !strings.Contains(err.Error(), "KICI_WORK_DIR") {
			t.Errorf("KICI_WORK_DIR=%s: err %v, want a KICI_WORK_DIR error", bad, err)
		}
	}
	// A sibling whose name merely starts with the data dir's is fine.
	if _, err := Load([]string{"KICI_DATA_DIR=" + data, "KICI_WORK_DIR=" + data + "-work"}); err != nil {
		t.Errorf("sibling work dir refused: %v", err)
	}
}
