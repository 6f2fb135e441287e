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
// refuse: spaces, line ends and other controls, a non-ASCII letter, an
// invalid UTF-8 byte.
var alphabet = []string{"a", "z", "A", "Z", "0", "9", "_", "-", ".", "@", ":", "+", "/", "*", " ", "\t", "\n", "\r", "\x00", "\x7f", "é", "\xff", "{", "}"}

// productRules is how many Regexps the imported packages build: a rule
// added to one of them, or a package of rules missing from the imports,
// changes it.
const productRules = 13

// TestEveryRuleMatchesAsWritten checks each Regexp of the product against
// its expression compiled as written, on strings at and around both
// length bounds and on random ones: the two must agree on every string,
// and among those tried must be a match of the least and of the most
// characters, and a string one character over that only the bound
// refuses.
func TestEveryRuleMatchesAsWritten(t *testing.T) {
	rules := boundedre.Built()
	if len(rules) != productRules {
		t.Fatalf("%d rules built, want %d: a package that uses boundedre belongs in this test's imports, and productRules counts its rules", len(rules), productRules)
	}
	for _, r := range rules {
		t.Run(r.String(), func(t *testing.T) {
			written := r.Written()
			lo, hi := r.Bounds()
			var atMin, atMax, overMax bool
			check := func(s string) {
				got, want := r.MatchString(s), written.MatchString(s)
				if got != want {
					t.Fatalf("%q (%d bytes): bounded %v, as written %v", s, len(s), got, want)
				}
				n := len([]rune(s))
				atMin = atMin || (got && n == lo)
				atMax = atMax || (got && n == hi)
				overMax = overMax || (!got && n == hi+1 && r.OpenMatches(s))
			}
			for _, n := range []int{0, 1, 2, 3, 4, lo, hi - 2, hi - 1, hi, hi + 1, hi + 2} {
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
				for range rng.IntN(hi + 4) {
					b.WriteString(alphabet[rng.IntN(6)]) // mostly letters and digits
					if rng.IntN(8) == 0 {
						b.WriteString(alphabet[rng.IntN(len(alphabet))])
					}
				}
				check(b.String())
			}
			if !atMin || !atMax || !overMax {
				t.Errorf("the tried strings missed a bound: a match of %d characters %v, of %d %v, a string of %d refused by its length alone %v", lo, atMin, hi, atMax, hi+1, overMax)
			}
		})
	}
}

func max0(n int) int { return max(n, 0) }

// TestMustCompileRefusesWhatItCannotBound checks the rules a caller must
// follow: a counted repetition to open, and bounds in order.
func TestMustCompileRefusesWhatItCannotBound(t *testing.T) {
	for _, c := range []struct {
		expr   string
		lo, hi int
	}{{`^[a-z]+$`, 1, 10}, {`^[a-z]{1,10}$`, 5, 4}, {`^[a-z]{1,10}$`, -1, 10}, {`^[a-z{1,10}$`, 1, 10}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("MustCompile(%q, %d, %d) did not panic", c.expr, c.lo, c.hi)
				}
			}()
			boundedre.MustCompile(c.expr, c.lo, c.hi)
		}()
	}
}
