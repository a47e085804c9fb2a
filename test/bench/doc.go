// Package bench measures Berth against the raw Docker Engine in the same
// run and prints one table (`make bench`): P1 Session create to execution
// admitted, P2 a Turn round trip, P3 RunCommand through a node agent, P4
// throughput over four node agents, P6 failure detection (a bound), P7
// Docker filesystem checkpoints, P8 suspension and wake through Core, F1
// files through Core and the Runtime. docs/bench.md says what each
// measure times and against what. P5, the 1,000-node scale simulator, is
// test/scale (`make bench-scale`); BenchmarkForkCopy (`make
// bench-fork-copy`) is issue 33's step K0, measured alone.
//
// Rules:
//   - Every baseline does the same work through the Engine API from Go
//     with the adapter's own client (docker.NewClient), never through a
//     CLI process; the docker CLI's figures are printed beside, never
//     divided by.
//   - Berth runs at its default settings, as installed: the table's header
//     names every flag or key beyond addresses and paths
//     (stack.Settings), and the benchmark refuses to run if there is one.
//   - A Berth p99 of fewer than 100 samples is printed as "max". Samples
//     are interleaved, Berth then baseline, and everything a sample
//     creates is deleted before the next one.
//   - Nothing here asserts a time: the smoke test runs each measure once
//     so that the benchmark cannot rot, and the goals are only reported.
package bench
