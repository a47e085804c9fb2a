package chaos

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/moby/moby/api/types/container"

	"berth.dev/test/internal/stack"
)

// TestMain builds the binaries, runs the scenarios, prints the results
// table and fails the run if any captured log of the suite holds a secret.
func TestMain(m *testing.M) {
	code := stack.Run(m)
	printResults()
	if found := leaks(allLogs()); len(found) > 0 {
		for _, f := range found {
			fmt.Fprintln(os.Stderr, "chaos: a secret reached a log:", f)
		}
		code = 1
	}
	os.Exit(code)
}

// runs is how many times each scenario runs: CHAOS_RUNS (default 1, the
// shortened form).
func runs() int {
	if n, err := strconv.Atoi(os.Getenv("CHAOS_RUNS")); err == nil && n > 0 {
		return n
	}
	return 1
}

// run is one run of a scenario: its seed, random source and figures.
type run struct {
	seed       uint64
	rng        *rand.Rand
	ops        atomic.Int64
	faults     atomic.Int64
	violations atomic.Int64
	recovery   time.Duration // 0 when the scenario has no repair
	ratios     []float64
	mu         sync.Mutex
}

func (r *run) addRatio(x float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ratios = append(r.ratios, x)
}

// fault counts one injected fault and logs it.
func (r *run) fault(t testing.TB, format string, args ...any) {
	t.Helper()
	r.faults.Add(1)
	t.Logf("fault: "+format, args...)
}

// scenario runs fn runs() times, each as a subtest with its own seed
// (CHAOS_SEED replays one), and records the figures for the table.
func scenario(t *testing.T, name string, fn func(t *testing.T, r *run)) {
	for i := range runs() {
		t.Run(fmt.Sprintf("run%d", i+1), func(t *testing.T) {
			seed := uint64(time.Now().UnixNano())
			if s, err := strconv.ParseUint(os.Getenv("CHAOS_SEED"), 10, 64); err == nil {
				seed = s
			}
			r := &run{seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
			t.Logf("scenario %s run %d seed %d (replay with CHAOS_SEED=%d)", name, i+1, seed, seed)
			start := time.Now()
			defer func() {
				if t.Failed() && r.violations.Load() == 0 {
					// A failure outside the invariants (setup, a refusal
					// check) still counts against the scenario.
					r.violations.Add(1)
				}
				t.Logf("scenario %s run %d: %v, %d operations, %d faults, %d violations, recovery %v",
					name, i+1, time.Since(start).Round(time.Millisecond), r.ops.Load(), r.faults.Load(), r.violations.Load(), r.recovery)
				record(name, r)
			}()
			fn(t, r)
		})
	}
}

// result is one row of the table.
type result struct {
	runs, violations int
	recoveries       []time.Duration
	ratios           []float64
}

var (
	resultsMu sync.Mutex
	results   = map[string]*result{}
	order     []string
)

func record(name string, r *run) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	res := results[name]
	if res == nil {
		res = &result{}
		results[name] = res
		order = append(order, name)
	}
	res.runs++
	res.violations += int(r.violations.Load())
	if r.recovery > 0 {
		res.recoveries = append(res.recoveries, r.recovery)
	}
	r.mu.Lock()
	res.ratios = append(res.ratios, r.ratios...)
	r.mu.Unlock()
}

// printResults prints the table: scenario, runs, violations, median
// recovery time and the median I5 latency ratio.
func printResults() {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	if len(order) == 0 {
		return
	}
	var out io.Writer = os.Stdout
	if path := os.Getenv("CHAOS_REPORT"); path != "" {
		if f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			defer f.Close()
			out = io.MultiWriter(os.Stdout, f)
		}
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "scenario\truns\tviolations\tmedian recovery\tI5 ratio (during/before)")
	for _, name := range order {
		r := results[name]
		rec, ratio := "-", "-"
		if len(r.recoveries) > 0 {
			rec = median(r.recoveries).Round(time.Millisecond).String()
		}
		if len(r.ratios) > 0 {
			s := slices.Clone(r.ratios)
			slices.Sort(s)
			ratio = fmt.Sprintf("%.2f", s[len(s)/2])
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\n", name, r.runs, r.violations, rec, ratio)
	}
	_ = w.Flush()
}

// median of a non-empty list of durations.
func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// The secrets the suite saw (admin tokens, enrollment tokens, device
// credentials) and every log it captured, for the scans.
var (
	secretsMu sync.Mutex
	secrets   []string
	logs      []string
)

func addSecret(s string) {
	if len(s) < 8 {
		return
	}
	secretsMu.Lock()
	defer secretsMu.Unlock()
	secrets = append(secrets, s)
	// An enrollment token's secret part alone must not appear either.
	if parts := strings.Split(s, "."); len(parts) == 4 && len(parts[2]) >= 8 {
		secrets = append(secrets, parts[2])
	}
}

func addLogs(l ...string) {
	secretsMu.Lock()
	defer secretsMu.Unlock()
	logs = append(logs, l...)
}

func allLogs() []string {
	secretsMu.Lock()
	defer secretsMu.Unlock()
	return slices.Clone(logs)
}

// pemMarkers must never appear in a log: no key or certificate material.
var pemMarkers = []string{"-----BEGIN", "PRIVATE KEY-----"}

// leaks returns a description of each secret or PEM marker found in logs
// (never the secret itself).
func leaks(logs []string) []string {
	secretsMu.Lock()
	known := slices.Clone(secrets)
	secretsMu.Unlock()
	var found []string
	for i, l := range logs {
		for j, s := range known {
			if strings.Contains(l, s) {
				found = append(found, fmt.Sprintf("log %d holds known secret #%d", i, j))
			}
		}
		for _, m := range pemMarkers {
			if strings.Contains(l, m) {
				found = append(found, fmt.Sprintf("log %d holds %q", i, m))
			}
		}
	}
	return found
}

// containerConfig is a foreign container's configuration: the runtime
// image (already on the engine), never started.
func containerConfig(image string, labels map[string]string) *container.Config {
	return &container.Config{Image: image, Labels: labels, Cmd: []string{"true"}}
}
