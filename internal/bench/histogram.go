package bench

import (
	"fmt"
	"io"
	"math"
	"sort"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The accept latency the senders see includes their own share of the
// host's CPUs: the benchmark's 16 senders sign and send their requests on
// the cores the orchestrator (and the PostgreSQL server) run on. The
// orchestrator's own accept time, from a request's arrival to its answer,
// is what its kici_orch_webhook_accept_duration_seconds histogram counts;
// the benchmark reads it before and after the burst and prints the
// burst's p99 beside the senders' figure.

// bucket is one cumulative bucket of a Prometheus histogram: the count
// of observations at or below le (seconds).
type bucket struct {
	le    float64
	count uint64
}

// histogramBuckets reads the cumulative buckets of histogram name whose
// labels include every pair of match, from the text exposition format,
// sorted by upper bound (+Inf last). Errors: unreadable exposition, no
// such histogram or series.
func histogramBuckets(exposition io.Reader, name string, match map[string]string) ([]bucket, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(exposition)
	if err != nil {
		return nil, err
	}
	f := families[name]
	if f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
		return nil, fmt.Errorf("no histogram %s", name)
	}
	for _, m := range f.GetMetric() {
		if !labelsMatch(m.GetLabel(), match) {
			continue
		}
		h := m.GetHistogram()
		out := make([]bucket, 0, len(h.GetBucket())+1)
		for _, b := range h.GetBucket() {
			out = append(out, bucket{le: b.GetUpperBound(), count: b.GetCumulativeCount()})
		}
		if len(out) == 0 || !math.IsInf(out[len(out)-1].le, 1) {
			out = append(out, bucket{le: math.Inf(1), count: h.GetSampleCount()})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].le < out[j].le })
		return out, nil
	}
	return nil, fmt.Errorf("no series of %s with labels %v", name, match)
}

func labelsMatch(labels []*dto.LabelPair, match map[string]string) bool {
	found := 0
	for _, l := range labels {
		if v, ok := match[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			found++
		}
	}
	return found == len(match)
}

// quantileBetween is the q-quantile (0 < q ≤ 1) of the observations a
// cumulative histogram gained between two readings of it (same buckets),
// interpolated linearly inside the bucket it falls in, as Prometheus's
// histogram_quantile does; lo and hi are that bucket's bounds, so the
// caller can say how coarse the figure is. Errors: no observation in
// between, different buckets, or the quantile in the +Inf bucket.
func quantileBetween(before, after []bucket, q float64) (v, lo, hi float64, err error) {
	if len(before) != len(after) {
		return 0, 0, 0, fmt.Errorf("histogram buckets changed between readings")
	}
	total := after[len(after)-1].count - before[len(before)-1].count
	if total == 0 {
		return 0, 0, 0, fmt.Errorf("no observation between the readings")
	}
	rank := q * float64(total)
	var prevCount uint64
	prevLE := 0.0
	for i := range after {
		if after[i].le != before[i].le {
			return 0, 0, 0, fmt.Errorf("histogram buckets changed between readings")
		}
		c := after[i].count - before[i].count
		if float64(c) >= rank {
			if math.IsInf(after[i].le, 1) {
				return 0, prevLE, after[i].le, fmt.Errorf("the quantile is above the last bucket (%g s)", prevLE)
			}
			in := float64(c - prevCount)
			v = prevLE
			if in > 0 {
				v += (after[i].le - prevLE) * (rank - float64(prevCount)) / in
			}
			return v, prevLE, after[i].le, nil
		}
		prevCount, prevLE = c, after[i].le
	}
	return 0, 0, 0, fmt.Errorf("no bucket holds the quantile")
}

// acceptBuckets reads the orchestrator's accept-time histogram for
// accepted deliveries (code 202) from its /metrics.
func (o *orch) acceptBuckets() ([]bucket, error) {
	resp, err := o.http.Get(o.url + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return histogramBuckets(resp.Body, "kici_orch_webhook_accept_duration_seconds", map[string]string{"code": "202"})
}
