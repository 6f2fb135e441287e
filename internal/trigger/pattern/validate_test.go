package pattern

import (
	"strings"
	"testing"
)

func TestValidateGlob(t *testing.T) {
	for _, ok := range []string{"pr-*", "release/{eu,us}", `a\[b`, "[]x]", "[[:alpha:]]*", "acme/**"} {
		if err := ValidateGlob(ok); err != nil {
			t.Errorf("ValidateGlob(%q) = %v, want nil", ok, err)
		}
	}
	for p, want := range map[string]string{
		"[abc": `unclosed "["`, "abc]": `unmatched "]"`, "{a,b": `unclosed "{"`, "a}": `unmatched "}"`,
	} {
		if err := ValidateGlob(p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateGlob(%q) = %v, want an error saying %s", p, err, want)
		}
	}
}
