package bench

import (
	"berth.dev/test/internal/benchstat"

	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/sandbox/testenv"

	"berth.dev/test/internal/stack"
)

func TestMain(m *testing.M) { stack.Main(m) }

// BenchmarkBerth runs P1-P4, P7, P8a-b, P9, P10, F1 and P11 (the Runtime's
// idle memory, in P1's Sessions) BERTH_BENCH_SAMPLES times each (default 20),
// P8c at most 10 times and
// P6 at most 5 times per fault against a berth-core at its default
// settings, prints the table and
// writes it as JSON to BERTH_BENCH_JSON (default .run/bench.json in the
// repository). Run it with `make bench`, once (-benchtime 1x): the samples
// are its own, not b.N.
func BenchmarkBerth(b *testing.B) {
	samples := benchstat.EnvInt(b, "BERTH_BENCH_SAMPLES", 20)
	start := time.Now()
	rows, rss, ph, settings := measure(b, samples, true)
	for _, r := range rows {
		r.summarize()
	}
	rss.summarize()
	ph.summarize()
	rep := report{Time: start.UTC(), Samples: samples, Core: settings, Measures: rows, RuntimeIdle: rss, P1Phases: ph}
	printTable(os.Stdout, rep)
	benchstat.Save(b, "BERTH_BENCH_JSON", filepath.Join(stack.RepoRoot(), ".run", "bench.json"), rep)
	for _, r := range rows {
		b.ReportMetric(r.metric())
	}
}

// TestBenchSmoke runs every measure of BenchmarkBerth once, with Core at
// the tests' short intervals, so that the benchmark cannot rot. It asserts
// nothing about time.
func TestBenchSmoke(t *testing.T) {
	testenv.SkipShort(t, "a Docker Engine, PostgreSQL and the runtime image")
	rows, rss, ph, settings := measure(t, 1, false)
	rss.summarize()
	ph.summarize()
	for i, n := range ph.Names {
		if len(ph.samples[i]) != 1 || ph.samples[i][0] < 0 {
			t.Errorf("P1 phase %q: samples %v", n, ph.samples[i])
		}
		if hasBaseline := i >= phaseToStart && i < phaseToStart+baselinePhases; hasBaseline != (ph.BaselineMedianMS[i] >= 0) {
			t.Errorf("P1 phase %q: baseline median %v", n, ph.BaselineMedianMS[i])
		}
	}
	if len(rss.Samples) != 1 || rss.MedianBytes <= 0 {
		t.Errorf("P11: %d samples, median %d bytes", len(rss.Samples), rss.MedianBytes)
	}
	for _, r := range rows {
		r.summarize()
		wantBaseline := 1
		if r.Kind == bound {
			wantBaseline = 0
		}
		if len(r.berth) != 1 || len(r.baseline) != wantBaseline {
			t.Errorf("%s: %d Berth and %d baseline samples, want 1 and %d", r.ID, len(r.berth), len(r.baseline), wantBaseline)
		}
	}
	rep := report{Samples: 1, Core: settings, Measures: rows, RuntimeIdle: rss, P1Phases: ph}
	var w strings.Builder
	printTable(&w, rep)
	t.Log(w.String())
	if err := benchstat.WriteJSON(filepath.Join(t.TempDir(), "bench.json"), rep); err != nil {
		t.Errorf("writeJSON: %v", err)
	}
	// What BenchmarkBerth reports: units without white space, or
	// testing.B panics.
	for _, r := range rows {
		if _, unit := r.metric(); strings.ContainsAny(unit, " \t") {
			t.Errorf("%s: metric unit %q", r.ID, unit)
		}
	}
}
