package bench

import (
	"berth.dev/test/internal/benchstat"

	"fmt"
	"io"
	"strings"
	"time"
)

// The kinds of measure.
const (
	// latency: Berth's median over the baseline's, at most Goal.
	latency = "latency"
	// throughput: Batch units per sample; the ratio is Berth's rate over
	// the baseline's (the baseline's median over Berth's), at least Goal.
	throughput = "throughput"
	// bound: no baseline; Berth's p99 at most Goal seconds.
	bound = "bound"
)

// row is one measure: Berth's samples, the baseline's, interleaved, and
// the docker CLI's where it has a counterpart (printed beside only).
type row struct {
	ID       string  `json:"id"`
	Kind     string  `json:"kind"`
	Measure  string  `json:"measure"`
	Baseline string  `json:"baseline"`
	Goal     float64 `json:"goal"`
	// Batch is how many units (Sessions, containers) one throughput
	// sample completes.
	Batch int `json:"batch,omitempty"`
	// BerthPerSecond and BaselinePerSecond are a throughput row's rates at
	// the medians.
	BerthPerSecond    float64 `json:"berth_per_second,omitempty"`
	BaselinePerSecond float64 `json:"baseline_per_second,omitempty"`

	BerthMedianMS float64 `json:"berth_median_ms"`
	// BerthP99MS is the nearest-rank p99 of Berth's samples; BerthTail
	// says whether that is a p99 or, under 100 samples, their maximum
	// (benchstat.Tail).
	BerthP99MS       float64 `json:"berth_p99_ms"`
	BerthTail        string  `json:"berth_tail"`
	BaselineMedianMS float64 `json:"baseline_median_ms"`
	Ratio            float64 `json:"ratio"`
	MeetsGoal        bool    `json:"meets_goal"`
	// DockerCLIMedianMS is the docker CLI doing the baseline's work, for
	// reference only; 0 where there is none.
	DockerCLIMedianMS float64 `json:"docker_cli_median_ms,omitempty"`

	BerthMS    []float64 `json:"berth_samples_ms"`
	BaselineMS []float64 `json:"baseline_samples_ms"`

	berth, baseline, cli []time.Duration
}

// add records one interleaved sample; cli is zero when not measured, and
// baseline is zero in a bound row.
func (r *row) add(berth, baseline, cli time.Duration) {
	r.berth = append(r.berth, berth)
	if baseline > 0 {
		r.baseline = append(r.baseline, baseline)
	}
	if cli > 0 {
		r.cli = append(r.cli, cli)
	}
}

// summarize fills the figures from the samples.
func (r *row) summarize() {
	r.BerthMedianMS = benchstat.Millis(benchstat.Percentile(r.berth, 50))
	r.BerthP99MS = benchstat.Millis(benchstat.Percentile(r.berth, 99))
	r.BerthTail = benchstat.Tail(len(r.berth))
	r.BaselineMedianMS = benchstat.Millis(benchstat.Percentile(r.baseline, 50))
	switch r.Kind {
	case throughput:
		r.Ratio = r.BaselineMedianMS / r.BerthMedianMS
		r.MeetsGoal = r.Ratio >= r.Goal
		r.BerthPerSecond = float64(r.Batch) / (r.BerthMedianMS / 1000)
		r.BaselinePerSecond = float64(r.Batch) / (r.BaselineMedianMS / 1000)
	case bound:
		r.Ratio = 0
		r.MeetsGoal = r.BerthP99MS <= r.Goal*1000
	default:
		r.Ratio = r.BerthMedianMS / r.BaselineMedianMS
		r.MeetsGoal = r.Ratio <= r.Goal
	}
	if len(r.cli) > 0 {
		r.DockerCLIMedianMS = benchstat.Millis(benchstat.Percentile(r.cli, 50))
	}
	r.BerthMS, r.BaselineMS = allMillis(r.berth), allMillis(r.baseline)
}

// metric is the row's figure for testing.B.ReportMetric, whose units
// take no white space: the ratio, or a bound row's p99 (or maximum) in
// milliseconds.
func (r *row) metric() (float64, string) {
	id := strings.ReplaceAll(r.ID, " ", "-")
	if r.Kind == bound {
		return r.BerthP99MS, id + "-" + r.BerthTail + "-ms"
	}
	return r.Ratio, id + "-ratio"
}

func allMillis(d []time.Duration) []float64 {
	out := make([]float64, len(d))
	for i, v := range d {
		out[i] = benchstat.Millis(v)
	}
	return out
}

// report is the JSON form of one run.
type report struct {
	Time    time.Time `json:"time"`
	Samples int       `json:"samples"`
	// Core names the settings Berth ran with: the flags and keys that
	// differ from berth-core's and berth-nodeagent's defaults, read from
	// the processes' argv and configuration (stack.Settings).
	Core     string `json:"core"`
	Measures []*row `json:"measures"`
	// RuntimeIdle is P11, the Runtime's idle resident memory: bytes, not
	// a time, so it is printed after the table.
	RuntimeIdle *memory `json:"runtime_idle,omitempty"`
	// P1Phases is P1's breakdown by phase, printed under the table.
	P1Phases *phases `json:"p1_phases,omitempty"`
}

// printTable writes the one table, then the baselines and the docker CLI
// figures beside it.
func printTable(w io.Writer, rep report) {
	fmt.Fprintf(w, "\nBerth benchmarks: %d samples each, interleaved with their baselines; %s\n\n", rep.Samples, rep.Core)
	width := len("measure")
	for _, r := range rep.Measures {
		width = max(width, len(r.ID)+1+len(r.Measure))
	}
	fmt.Fprintf(w, "%-*s  %12s  %16s  %15s  %6s  %6s  %-6s  %17s\n", width, "measure",
		"Berth median", "Berth p99 (max)", "baseline median", "ratio", "goal", "", "docker CLI median")
	for _, r := range rep.Measures {
		verdict := "met"
		if !r.MeetsGoal {
			verdict = "missed"
		}
		cli := "-"
		if r.DockerCLIMedianMS > 0 {
			cli = fmt.Sprintf("%.1f ms", r.DockerCLIMedianMS)
		}
		base, ratio, goal := fmt.Sprintf("%12.1f ms", r.BaselineMedianMS), fmt.Sprintf("%6.2f", r.Ratio), fmt.Sprintf("≤%.2f", r.Goal)
		switch r.Kind {
		case throughput:
			goal = fmt.Sprintf("≥%.2f", r.Goal)
		case bound:
			base, ratio, goal = fmt.Sprintf("%15s", "-"), fmt.Sprintf("%6s", "-"), fmt.Sprintf("≤%gs", r.Goal)
		}
		fmt.Fprintf(w, "%-*s  %9.1f ms  %16s  %s  %s  %6s  %-6s  %17s\n", width, r.ID+" "+r.Measure,
			r.BerthMedianMS, fmt.Sprintf("%s %.1f ms", r.BerthTail, r.BerthP99MS), base, ratio, goal, verdict, cli)
	}
	fmt.Fprintln(w)
	for _, r := range rep.Measures {
		fmt.Fprintf(w, "  %s baseline: %s\n", r.ID, r.Baseline)
		if r.Kind == throughput {
			fmt.Fprintf(w, "  %s rates: Berth %.1f/s, baseline %.1f/s (%d per sample, at the medians)\n", r.ID, r.BerthPerSecond, r.BaselinePerSecond, r.Batch)
		}
	}
	fmt.Fprintln(w, "  Berth p99 (max): the nearest-rank p99, labelled max under 100 samples, where it is their largest")
	fmt.Fprintln(w, "  docker CLI: the same exec through `docker exec`, for reference only (never a ratio's denominator)")
	fmt.Fprintln(w)
	if rep.P1Phases != nil {
		rep.P1Phases.print(w)
	}
	if rep.RuntimeIdle != nil {
		rep.RuntimeIdle.print(w)
	}
}
