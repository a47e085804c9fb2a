package benchstat

import (
	"testing"
	"time"
)

// TestPercentile: the median of an even count is the mean of the middle
// two, p99 is the nearest rank (the maximum below 100 samples).
func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	for _, c := range []struct {
		samples []time.Duration
		p       float64
		want    time.Duration
	}{
		{ms(3, 1, 2), 50, 2 * time.Millisecond},
		{ms(4, 1, 3, 2), 50, 2500 * time.Microsecond},
		{ms(5), 99, 5 * time.Millisecond},
		{ms(9, 1, 5, 7, 3), 99, 9 * time.Millisecond},
		{nil, 50, 0},
	} {
		if got := Percentile(c.samples, c.p); got != c.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", c.samples, c.p, got, c.want)
		}
	}
}
