package api

import (
	"os"
	"path/filepath"
	"testing"
)

func readDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "admin-api.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
