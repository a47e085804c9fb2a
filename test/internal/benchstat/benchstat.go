package benchstat

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// Percentile is the nearest-rank percentile p (0 < p <= 100) of samples;
// the median of an even count is the mean of the two middle samples. No
// samples give 0.
func Percentile(samples []time.Duration, p float64) time.Duration {
	s := slices.Clone(samples)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if p == 50 && len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[max(rank, 1)-1]
}

// Tail names what Percentile(samples, 99) of n samples is: "p99" from
// 100 samples on, "max" below (a nearest-rank p99 of fewer than 100
// samples is their largest), so that a report never calls a maximum a
// percentile.
func Tail(n int) string {
	if n < 100 {
		return "max"
	}
	return "p99"
}

// Millis is d in milliseconds, to the microsecond.
func Millis(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }

// EnvInt is the positive integer in the environment variable name, def
// when it is unset; anything else fails the benchmark.
func EnvInt(tb testing.TB, name string, def int) int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// Save writes a run's report v as JSON to the path in the environment
// variable env, or to fallback when it is unset, and says where.
func Save(tb testing.TB, env, fallback string, v any) {
	tb.Helper()
	path := os.Getenv(env)
	if path == "" {
		path = fallback
	}
	if err := WriteJSON(path, v); err != nil {
		tb.Fatalf("write %s: %v", path, err)
	}
	tb.Logf("wrote %s", path)
}

// WriteJSON writes v, indented, to path, creating its folder.
func WriteJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
