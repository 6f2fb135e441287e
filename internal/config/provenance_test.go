package config

import "testing"

func TestParseIssuer(t *testing.T) {
	for _, ok := range []string{"", "https://ci.example.com", "https://ci.example.com/kici/", "http://127.0.0.1:4000", "http://localhost:8080"} {
		if got, err := ParseIssuer(ok); err != nil || got != ok {
			t.Errorf("ParseIssuer(%q) = %q, %v", ok, got, err)
		}
	}
	for _, bad := range []string{"ci.example.com", "ftp://x", "http://ci.example.com", "https://ci.example.com/?a=b", "https://u:p@ci.example.com", "https://x#f"} {
		if _, err := ParseIssuer(bad); err == nil {
			t.Errorf("ParseIssuer(%q) accepted", bad)
		}
	}
	c, err := Load([]string{"KICI_ORCHESTRATOR_PROVENANCE_ISSUER=https://ci.example.com", "KICI_DATA_DIR=" + t.TempDir()})
	if err != nil || c.ProvenanceIssuer != "https://ci.example.com" {
		t.Fatalf("Load: %+v %v", c, err)
	}
	if _, err := Load([]string{"KICI_ORCHESTRATOR_PROVENANCE_ISSUER=http://evil.example", "KICI_DATA_DIR=" + t.TempDir()}); err == nil {
		t.Fatal("plain http issuer accepted")
	}
}
