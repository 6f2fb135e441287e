package orchestrator

import (
	"testing"

	"kici.dev/kici/internal/config"
)

// The embedded default signs under its own URL; a configured issuer wins;
// PostgreSQL without one leaves signing off (its nodes must agree on a
// name only the operator knows).
func TestEmbeddedIssuer(t *testing.T) {
	own := "http://127.0.0.1:4000"
	cases := []struct {
		name string
		cfg  config.Config
		want string
	}{
		{"embedded default", config.Config{}, own},
		{"configured", config.Config{ProvenanceIssuer: "https://ci.example.com"}, "https://ci.example.com"},
		{"configured on postgres", config.Config{DatabaseURL: "postgres://db/kici", ProvenanceIssuer: "https://ci.example.com"}, "https://ci.example.com"},
		{"postgres without issuer", config.Config{DatabaseURL: "postgres://db/kici"}, ""},
	}
	for _, c := range cases {
		if got := embeddedIssuer(&c.cfg, own); got != c.want {
			t.Errorf("%s: issuer %q, want %q", c.name, got, c.want)
		}
	}
}
