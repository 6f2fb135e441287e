package bench

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

const acceptExposition = `# HELP kici_orch_webhook_accept_duration_seconds Time from a webhook request's arrival to its answer.
# TYPE kici_orch_webhook_accept_duration_seconds histogram
kici_orch_webhook_accept_duration_seconds_bucket{code="202",le="0.005"} %d
kici_orch_webhook_accept_duration_seconds_bucket{code="202",le="0.01"} %d
kici_orch_webhook_accept_duration_seconds_bucket{code="202",le="0.02"} %d
kici_orch_webhook_accept_duration_seconds_bucket{code="202",le="+Inf"} %d
kici_orch_webhook_accept_duration_seconds_sum{code="202"} 1
kici_orch_webhook_accept_duration_seconds_count{code="202"} %d
kici_orch_webhook_accept_duration_seconds_bucket{code="400",le="0.005"} 7
kici_orch_webhook_accept_duration_seconds_bucket{code="400",le="0.01"} 7
kici_orch_webhook_accept_duration_seconds_bucket{code="400",le="0.02"} 7
kici_orch_webhook_accept_duration_seconds_bucket{code="400",le="+Inf"} 7
kici_orch_webhook_accept_duration_seconds_sum{code="400"} 0
kici_orch_webhook_accept_duration_seconds_count{code="400"} 7
`

// readAccept reads acceptExposition with the code-202 series' cumulative
// counts at 5, 10 and 20 ms and in all.
func readAccept(t *testing.T, le5, le10, le20, all int) []bucket {
	t.Helper()
	text := fmt.Sprintf(acceptExposition, le5, le10, le20, all, all)
	b, err := histogramBuckets(strings.NewReader(text), "kici_orch_webhook_accept_duration_seconds", map[string]string{"code": "202"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestQuantileBetweenCountsOnlyTheBurst(t *testing.T) {
	// 20 accepts before the burst, all under 5 ms; the burst adds 100:
	// 60 under 5 ms, 30 in 5–10 ms, 10 in 10–20 ms.
	before := readAccept(t, 20, 20, 20, 20)
	after := readAccept(t, 80, 110, 120, 120)
	v, lo, hi, err := quantileBetween(before, after, 0.99)
	if err != nil {
		t.Fatal(err)
	}
	// Rank 99 of 100 lies 9 of the 10 observations into 10–20 ms.
	if lo != 0.01 || hi != 0.02 || math.Abs(v-0.019) > 1e-9 {
		t.Fatalf("p99 = %g in [%g, %g], want 0.019 in [0.01, 0.02]", v, lo, hi)
	}
	// The p50 is inside the first bucket: from 0 up.
	if v, lo, _, _ := quantileBetween(before, after, 0.5); lo != 0 || math.Abs(v-0.005*50/60) > 1e-9 {
		t.Fatalf("p50 = %g from %g, want %g from 0", v, lo, 0.005*50/60)
	}
}

func TestQuantileBetweenRefusesWhatItCannotTell(t *testing.T) {
	same := readAccept(t, 5, 5, 5, 5)
	if _, _, _, err := quantileBetween(same, same, 0.99); err == nil {
		t.Error("no observation between the readings: want an error")
	}
	// Every new observation above the last finite bucket.
	if _, _, _, err := quantileBetween(readAccept(t, 1, 1, 1, 1), readAccept(t, 1, 1, 1, 50), 0.99); err == nil {
		t.Error("the quantile in the +Inf bucket: want an error, not a made-up figure")
	}
	if _, err := histogramBuckets(strings.NewReader("kici_orch_webhook_accept_duration_seconds_bucket{code=\"202\",le=\"0.005\"} one\n"), "kici_orch_webhook_accept_duration_seconds", nil); err == nil || !strings.Contains(err.Error(), "parsing error") {
		t.Errorf("unreadable exposition: err = %v, want the parser's", err)
	}
	if _, err := histogramBuckets(strings.NewReader(fmt.Sprintf(acceptExposition, 1, 1, 1, 1, 1)), "kici_orch_webhook_accept_duration_seconds", map[string]string{"code": "500"}); err == nil {
		t.Error("no series with code 500: want an error")
	}
}
