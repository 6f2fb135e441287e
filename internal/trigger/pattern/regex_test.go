package pattern

import (
	"strings"
	"testing"
)

func TestCompileRegex(t *testing.T) {
	cases := []struct {
		src, flags, value string
		want              bool
	}{
		{`^release-\d+\.\d+$`, "", "release-1.0", true},
		{`^release-\d+\.\d+$`, "", "release-abc", false},
		{`^FEATURE`, "i", "feature-123", true},
		{`^FEATURE`, "", "feature-123", false},
		{`^release\/v\d+$`, "", "release/v2", true},
		{`^myorg/api-v\d+$`, "", "myorg/api-v2", true},
		{`api`, "", "myorg/api-v2", true}, // unanchored
		{`^deploy\s+\w+$`, "", "deploy staging", true},
		{`\u0041`, "", "A", true},
		{`b`, "y", "ab", false}, // sticky anchors at 0
		{`a.b`, "s", "a\nb", true},
		{`^b$`, "m", "a\nb", true},
		{`(?<ver>v\d+)`, "g", "v1", true},
	}
	for _, c := range cases {
		re, err := CompileRegex(c.src, c.flags)
		if err != nil {
			t.Fatalf("CompileRegex(%q,%q): %v", c.src, c.flags, err)
		}
		if got := re.MatchString(c.value); got != c.want {
			t.Errorf("/%s/%s vs %q = %v, want %v", c.src, c.flags, c.value, got, c.want)
		}
	}
}

func TestCompileRegexRejects(t *testing.T) {
	cases := []struct{ src, flags, want string }{
		{`^(?!\.)x`, "", "lookahead"},
		{`foo(?=bar)`, "", "lookahead"},
		{`(?<=a)b`, "", "lookbehind"},
		{`(?<!a)b`, "", "lookbehind"},
		{`(a)\1`, "", "backreferences"},
		{`(?<n>a)\k<n>`, "", "named backreferences"},
		{`x`, "q", "unknown flag"},
		{`x`, "ii", "duplicate flag"},
		{`(unclosed`, "", "invalid regex"},
		{`[^]`, "", "[^]"},
	}
	for _, c := range cases {
		_, err := CompileRegex(c.src, c.flags)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CompileRegex(%q,%q) error = %v, want containing %q", c.src, c.flags, err, c.want)
		}
	}
}

func TestCheckSafeRegex(t *testing.T) {
	safe := []string{`^(?:^(?:kici\:host\:ci\-[^/]*?)$)$`, `.*-canary$`, `^v\d+\.\d+\.\d+$`}
	for _, s := range safe {
		if err := CheckSafeRegex(s, ""); err != nil {
			t.Errorf("CheckSafeRegex(%q) = %v, want nil", s, err)
		}
	}
	unsafe := []string{`(a+)+$`, `(x*)*y`, `(a?)*`, strings.Repeat("a*", 26)}
	for _, s := range unsafe {
		if err := CheckSafeRegex(s, ""); err == nil || !strings.Contains(err.Error(), "ReDoS") {
			t.Errorf("CheckSafeRegex(%q) = %v, want ReDoS error", s, err)
		}
	}
}
