// Package benchstat is what the benchmarks (test/bench, test/scale) share:
// percentiles of timed samples in milliseconds and the JSON file a run's
// table is written to, so that both reports compute a p50 or a p99 the
// same way.
//
// Rules:
//   - A percentile over fewer samples than it needs is labelled (Tail
//     names a p99 under 100 samples "max"), never reported as if measured.
//   - A run's report is also written as JSON (Save: to the path an
//     environment variable names, or the caller's default such as
//     .run/bench.json), so a run can be compared with the next.
//   - Internal to the test module; it imports only the standard library.
package benchstat
