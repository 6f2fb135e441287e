package boundedre_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"kici.dev/kici/internal/boundedre"

	// The packages whose rules are boundedre Regexps: linking them builds
	// their rules, which the test then finds in boundedre.Built.
	_ "kici.dev/kici/internal/api"
	_ "kici.dev/kici/internal/lockfile"
	_ "kici.dev/kici/internal/logstore"
	_ "kici.dev/kici/internal/scaler/scalerconfig"
	_ "kici.dev/kici/internal/secrets"
	_ "kici.dev/kici/internal/vmguest"
)

// alphabet mixes characters every rule admits somewhere with ones they
// refuse: spaces and controls, a non-ASCII letter, an invalid UTF-8 byte.
var alphabet = []string{"a", "z", "A", "Z", "0", "9", "_", "-", ".", "@", ":", "+", "/", "*", " ", "\t", "\x00", "\x7f", "é", "\xff", "{", "}"}

// TestEveryRuleMatchesAsWritten checks each Regexp of the product against
// its expression compiled as written, on strings at and around both
// length bounds and on random ones: the two must agree on every string,
// and both a string of the longest length and one a character longer must
// be among those tried, matched and refused.
func TestEveryRuleMatchesAsWritten(t *testing.T) {
	rules := boundedre.Built()
	if len(rules) < 10 {
		t.Fatalf("%d rules built; the product's packages build at least 10", len(rules))
	}
	for _, r := range rules {
		t.Run(r.String(), func(t *testing.T) {
			written := r.Written()
			_, max := r.Bounds()
			var atMax, overMax bool
			check := func(s string) {
				got, want := r.MatchString(s), written.MatchString(s)
				if got != want {
					t.Fatalf("%q (%d bytes): bounded %v, as written %v", s, len(s), got, want)
				}
				n := len([]rune(s))
				atMax = atMax || (got && n == max)
				overMax = overMax || (n == max+1 && prefixMatches(r, s))
			}
			for _, n := range []int{0, 1, 2, 3, 4, max - 2, max - 1, max, max + 1, max + 2} {
				if n < 0 {
					continue
				}
				for _, x := range alphabet {
					for _, y := range alphabet {
						check(y + strings.Repeat(x, max0(n-1)))
						check(strings.Repeat(x, max0(n-1)) + y)
						check(y + strings.Repeat(x, max0(n-2)) + y)
					}
				}
			}
			rng := rand.New(rand.NewPCG(1, uint64(len(r.String()))))
			for range 5000 {
				var b strings.Builder
				for range rng.IntN(max + 4) {
					b.WriteString(alphabet[rng.IntN(6)]) // mostly letters and digits
					if rng.IntN(8) == 0 {
						b.WriteString(alphabet[rng.IntN(len(alphabet))])
					}
				}
				check(b.String())
			}
			if !atMax || !overMax {
				t.Errorf("the tried strings missed the bound %d: one of that length matched %v, one a character longer whose prefix matched %v", max, atMax, overMax)
			}
		})
	}
}

// prefixMatches reports whether s less its last character matches r: a
// string one character over the bound that only the bound refuses, when
// the expression would take its last character.
func prefixMatches(r *boundedre.Regexp, s string) bool {
	rs := []rune(s)
	return len(rs) > 1 && r.MatchString(string(rs[:len(rs)-1]))
}

func max0(n int) int { return max(n, 0) }

// TestMustCompileRefusesWhatItCannotBound checks the rules a caller must
// follow: a counted repetition to open, and bounds in order.
func TestMustCompileRefusesWhatItCannotBound(t *testing.T) {
	for _, c := range []struct {
		expr     string
		min, max int
	}{{`^[a-z]+$`, 1, 10}, {`^[a-z]{1,10}$`, 5, 4}, {`^[a-z]{1,10}$`, -1, 10}, {`^[a-z{1,10}$`, 1, 10}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("MustCompile(%q, %d, %d) did not panic", c.expr, c.min, c.max)
				}
			}()
			boundedre.MustCompile(c.expr, c.min, c.max)
		}()
	}
}
