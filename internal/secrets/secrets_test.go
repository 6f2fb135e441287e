package secrets

import (
	"errors"
	"testing"
)

func TestParseRefAndNames(t *testing.T) {
	good := map[string][2]string{
		"release:npm_token":        {"release", "npm_token"},
		"pg:release:npm_token":     {"release", "npm_token"},
		"team/a/deploy:KEY.v2-x":   {"team/a/deploy", "KEY.v2-x"},
		"pg:__source__/x:webhook1": {"__source__/x", "webhook1"},
	}
	for ref, want := range good {
		s, k, err := ParseRef(ref)
		if err != nil || s != want[0] || k != want[1] {
			t.Errorf("ParseRef(%q) = %q %q %v, want %v", ref, s, k, err, want)
		}
	}
	for _, ref := range []string{"", "nokey", ":k", "s:", "vault:s:k", "a/../b:k", "a//b:k", "/a:k", "s:bad key", "s:k/1", "s:a:b c"} {
		if _, _, err := ParseRef(ref); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseRef(%q) accepted: %v", ref, err)
		}
	}
	for _, org := range []string{"", "a:b", "a/b", "a b"} {
		if ValidateOrg(org) == nil {
			t.Errorf("org %q accepted", org)
		}
	}
	// The AAD separators cannot be forged: no ':' in org, scope or key.
	if string(AAD("o", "s", "k")) != "o:s:k" {
		t.Fatal("AAD format")
	}
}
