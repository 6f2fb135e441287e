package bench

import "testing"

func TestCostRatioReadsEveryRowTheSameWay(t *testing.T) {
	for _, c := range []struct{ sqlite, postgres, want string }{
		{"20.0 ms", "30.0 ms", "1.50×"},                           // a time: PostgreSQL over SQLite
		{"900/s", "450/s", "2.00×"},                               // a rate: SQLite over PostgreSQL
		{"35.0 MB (1.10× idle)", "28.0 MB (1.00× idle)", "0.80×"}, // a size with a note after it
		{"12.0/s (0.95× shell 12.6/s)", "6.0/s (0.48× shell 12.5/s)", "2.00×"},
		{"20.0 ms", "-", ""},                    // not measured
		{"20.0 ms", "2.0/s", ""},                // different units
		{"100/s · 1.0 ms", "90/s · 1.1 ms", ""}, // a curve's composite row
		{"1000000 / 1000000 (job success)", "1000000 / 1000000 (job success)", ""},
		{"0.0 ms", "1.0 ms", ""}, // nothing to divide by
	} {
		if got := costRatio(c.sqlite, c.postgres); got != c.want {
			t.Errorf("costRatio(%q, %q) = %q, want %q", c.sqlite, c.postgres, got, c.want)
		}
	}
}
