package stack

import (
	"slices"
	"time"
)

// Median is the median of samples (the mean of the two middle ones for an
// even count), for benchmarks that report medians of interleaved samples.
func Median(samples []time.Duration) time.Duration {
	s := slices.Clone(samples)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Millis is d in milliseconds with microsecond precision, for
// testing.B.ReportMetric.
func Millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
