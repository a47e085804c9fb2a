package scale

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"berth.dev/test/internal/benchstat"
)

// row is one line of the table: a latency distribution (p50, p99), a
// single value, or both.
type row struct {
	Measure string  `json:"measure"`
	P50MS   float64 `json:"p50_ms,omitempty"`
	P99MS   float64 `json:"p99_ms,omitempty"`
	// Tail says whether P99MS is a p99 or, under 100 samples, their
	// maximum (benchstat.Tail).
	Tail    string  `json:"tail,omitempty"`
	Samples int     `json:"samples,omitempty"`
	Value   float64 `json:"value,omitempty"`
	Unit    string  `json:"unit,omitempty"`
	// Goal is the goal as text ("" when the measure has none); MeetsGoal
	// is reported, never asserted.
	Goal      string `json:"goal,omitempty"`
	MeetsGoal *bool  `json:"meets_goal,omitempty"`
}

// latency is a row of samples' p50 and p99; goalP99 (0: none) is the goal
// on p99.
func latency(measure string, d []time.Duration, goalP99 time.Duration) row {
	r := row{Measure: measure, P50MS: benchstat.Millis(benchstat.Percentile(d, 50)), P99MS: benchstat.Millis(benchstat.Percentile(d, 99)),
		Tail: benchstat.Tail(len(d)), Samples: len(d)}
	if goalP99 > 0 {
		ok := benchstat.Percentile(d, 99) < goalP99
		r.Goal, r.MeetsGoal = "p99 < "+goalP99.String(), &ok
	}
	return r
}

// value is a row of one figure.
func value(measure string, v float64, unit, goal string, meets *bool) row {
	return row{Measure: measure, Value: v, Unit: unit, Goal: goal, MeetsGoal: meets}
}

func ptr(b bool) *bool { return &b }

// report is the JSON form of one run.
type report struct {
	Time     time.Time `json:"time"`
	Machine  string    `json:"machine"`
	Nodes    int       `json:"nodes"`
	Seeded   int       `json:"seeded_allocations"`
	Creates  int       `json:"creates"`
	Clients  int       `json:"clients"`
	Projects int       `json:"projects"`
	Core     string    `json:"core"`
	Elapsed  string    `json:"elapsed"`
	Measures []row     `json:"measures"`
	// NotSimulated is what a real installation has that the run does
	// not, printed under the table so that no figure is read as more.
	NotSimulated []string `json:"not_simulated"`
}

// notSimulated is what the simulator leaves out (doc.go says why).
var notSimulated = []string{
	"no Runtime connects: no device credential is presented, no Turn runs, the gateway carries nothing",
	"no container engine: each node agent's adapter is in memory and answers at once, so creation and observation cost no engine time",
	"the node agents share this test process (one Go runtime, not a process per host)",
}

// printTable writes the one table.
func printTable(w io.Writer, rep report) {
	fmt.Fprintf(w, "\nBerth scale: %d simulated nodes, %d seeded allocations, %d CreateSession by %d clients over %d projects; %s; %s\n\n",
		rep.Nodes, rep.Seeded, rep.Creates, rep.Clients, max(rep.Projects, 1), rep.Core, rep.Machine)
	width := len("measure")
	for _, r := range rep.Measures {
		width = max(width, len(r.Measure))
	}
	fmt.Fprintf(w, "%-*s  %10s  %14s  %16s  %-22s  %s\n", width, "measure", "p50", "p99 (max)", "value", "goal", "")
	for _, r := range rep.Measures {
		p50, p99, v := "-", "-", "-"
		if r.Samples > 0 {
			p50, p99 = fmt.Sprintf("%.2f ms", r.P50MS), fmt.Sprintf("%s %.2f ms", r.Tail, r.P99MS)
		}
		if r.Unit != "" {
			prec := 1
			if r.Unit == "cores" {
				prec = 2
			}
			v = strconv.FormatFloat(r.Value, 'f', prec, 64) + " " + r.Unit
		} else if r.Samples > 0 {
			v = fmt.Sprintf("n=%d", r.Samples)
		}
		verdict := ""
		if r.MeetsGoal != nil {
			verdict = "met"
			if !*r.MeetsGoal {
				verdict = "missed"
			}
		}
		goal := r.Goal
		if goal == "" {
			goal = "-"
		}
		fmt.Fprintf(w, "%-*s  %10s  %14s  %16s  %-22s  %s\n", width, r.Measure, p50, p99, v, goal, verdict)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "  p99 (max): the nearest-rank p99, labelled max under 100 samples, where it is their largest")
	fmt.Fprintln(w, "  not simulated:")
	for _, n := range rep.NotSimulated {
		fmt.Fprintf(w, "  - %s\n", n)
	}
	fmt.Fprintln(w)
}

// machine names the host: CPUs and memory.
func machine() string {
	mem := "?"
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					mem = fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
				}
			}
		}
	}
	return fmt.Sprintf("%d CPUs, %s", numCPU(), mem)
}
