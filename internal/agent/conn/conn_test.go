package conn

import (
	"testing"
	"time"
)

func TestBackoffDelay(t *testing.T) {
	for n := 0; n < 20; n++ {
		lo := BackoffDelay(n, 0)
		hi := BackoffDelay(n, 0.999999)
		base := float64(time.Second)
		for i := 0; i < n; i++ {
			base *= 1.5
		}
		if base <= float64(MaxDelay) {
			if lo != time.Duration(base) {
				t.Errorf("n=%d lo=%s want %s", n, lo, time.Duration(base))
			}
			if hi < lo || float64(hi) >= 1.5*base+1 {
				t.Errorf("n=%d hi=%s out of [1,1.5)×%s", n, hi, time.Duration(base))
			}
		}
		if hi > MaxDelay || lo > MaxDelay {
			t.Errorf("n=%d exceeds cap: %s %s", n, lo, hi)
		}
	}
	if BackoffDelay(0, 0) != time.Second || BackoffDelay(2, 0) != 2250*time.Millisecond || BackoffDelay(50, 0.5) != MaxDelay {
		t.Error("fixed points")
	}
}
