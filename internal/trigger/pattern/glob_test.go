package pattern

import (
	"regexp"
	"strings"
	"testing"
)

func TestGlobMatch(t *testing.T) {
	cases := []struct {
		pattern, value string
		want           bool
	}{
		// globs
		{"main", "main", true},
		{"main", "develop", false},
		{"feature/*", "feature/login", true},
		{"feature/*", "bugfix/login", false},
		{"feature/*", "feature/a/b", false},
		{"release/**", "release/v1.0", true},
		{"release/**", "release/v1.0/hotfix", true},
		{"release/**", "release", true},
		{"release/**", "main", false},
		{"release-*", "release-1.0", true},
		{"release-*", "feature/test", false},
		{"v*", "v1.0.0", true},
		{"v*", "release-1.0", false},
		{"/deploy*", "/deploy production", true},
		{"/deploy*", "just a comment", false},
		{"/deploy*", "/deploy prod/eu", false},
		{"ci/*", "ci/test", true},
		{"ci/*", "deploy/staging", false},
		// paths
		{"src/**/*.ts", "src/app.ts", true},
		{"src/**/*.ts", "src/a/b/app.ts", true},
		{"src/**/*.ts", "tests/app.test.ts", false},
		{"**/*.md", "README.md", true},
		{"**/*.md", "docs/guide.md", true},
		{"**/*.test.ts", "src/app.test.ts", true},
		{"src/temp/**", "src/temp/cache.ts", true},
		// repos and the dotfile rule
		{"myorg/*", "myorg/api", true},
		{"myorg/*", "other/repo", false},
		{"myorg/*", "myorg/.github", false},
		{"src/**", "src/.env", false},
		{"**", ".github/workflows/ci.yaml", false},
		{"**", "a/b/c", true},
		{"*.md", ".md", false},
		{"*", "", false},
		{".*", ".env", true},
		{".github/**", ".github/workflows/x.yaml", true},
		{"**/.github/**", "a/.github/x", true},
		{"?env", ".env", false},
		{"?env", "xenv", true},
		// braces, classes, extglobs, escapes
		{"*.{js,ts}", "a.ts", true},
		{"*.{js,ts}", "a.go", false},
		{"{src,lib}/**", "lib/x/y", true},
		{"v{1..3}", "v2", true},
		{"v{1..3}", "v4", false},
		{"file[0-9].txt", "file7.txt", true},
		{"file[!0-9].txt", "filex.txt", true},
		{"file[!0-9].txt", "file7.txt", false},
		{"[[:alpha:]]*", "abc", true},
		{"@(foo|bar)-*", "bar-1", true},
		{"+(a|b).txt", "abba.txt", true},
		{"?(x)y", "y", true},
		{`a\*b`, "a*b", true},
		{`a\*b`, "axb", false},
		{"{x}", "{x}", true},
		// case and ./ prefix
		{"Main", "main", false},
		{"./src/*.go", "src/a.go", true},
		{"src/*.go", "./src/a.go", true},
		// negation
		{"!release", "main", true},
		{"!release", "release", false},
		{"!myorg/internal-*", "myorg/internal-tools", false},
	}
	for _, c := range cases {
		g, err := CompileGlob(c.pattern)
		if err != nil {
			t.Fatalf("CompileGlob(%q): %v", c.pattern, err)
		}
		if got := g.Match(c.value); got != c.want {
			t.Errorf("glob %q vs %q = %v, want %v", c.pattern, c.value, got, c.want)
		}
	}
}

func TestGlobErrors(t *testing.T) {
	for _, p := range []string{"!(a|b)", "@(a|b", "{" + strings.Repeat("a,", 40) + "b}{" + strings.Repeat("a,", 40) + "b}"} {
		if _, err := CompileGlob(p); err == nil {
			t.Errorf("CompileGlob(%q) = nil error, want error", p)
		}
	}
}

func TestIsGlob(t *testing.T) {
	for s, want := range map[string]bool{
		"kici:os:linux": false, "gpu-large.x": false, "kici:host:box-*": true,
		"a?": true, "{a,b}": true, "[ab]": true, "!x": true,
	} {
		if IsGlob(s) != want {
			t.Errorf("IsGlob(%q) = %v, want %v", s, !want, want)
		}
	}
}

func TestLabelGlobRegex(t *testing.T) {
	cases := []struct {
		glob  string
		match []string
		miss  []string
	}{
		{"kici:host:box-*", []string{"kici:host:box-1", "kici:host:box-"}, []string{"kici:host:other", "x-kici:host:box-1"}},
		{"*-canary", []string{"web-canary"}, []string{".x-canary", "-canary-x"}},
		{"*", []string{"a"}, []string{"", ".hidden"}},
		{"*.x", []string{"a.x"}, []string{".x"}},
		{"gpu-{a100,h100}", []string{"gpu-a100", "gpu-h100"}, []string{"gpu-v100"}},
		{"?pu", []string{"gpu"}, []string{".pu", "pu"}},
	}
	for _, c := range cases {
		src, err := LabelGlobRegex(c.glob)
		if err != nil {
			t.Fatalf("LabelGlobRegex(%q): %v", c.glob, err)
		}
		re := regexp.MustCompile(src)
		for _, m := range c.match {
			if !re.MatchString(m) {
				t.Errorf("label glob %q (regex %s) should match %q", c.glob, src, m)
			}
		}
		for _, m := range c.miss {
			if re.MatchString(m) {
				t.Errorf("label glob %q (regex %s) should not match %q", c.glob, src, m)
			}
		}
		if err := CheckSafeRegex(src, ""); err != nil {
			t.Errorf("generated regex %s is not safe: %v", src, err)
		}
	}
}
