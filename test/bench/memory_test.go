package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"berth.dev/runtimebootstrap"
)

// runtimeIdleGoal is issue 32's goal for the Runtime's resident memory
// while it waits for work: at most 8 MB.
const runtimeIdleGoal = 8 << 20

// idleSettle is how long an admitted Session is left before its Runtime's
// memory is read: past its start and its first Hello.
const idleSettle = time.Second

// memory is the Runtime's idle resident set, one sample per Session, read
// from the engine's process list of the Session's container (the host's
// ps through ContainerTop: nothing Berth reports).
type memory struct {
	Measure     string  `json:"measure"`
	GoalBytes   int64   `json:"goal_bytes"`
	Samples     []int64 `json:"samples_bytes"`
	MedianBytes int64   `json:"median_bytes"`
	MaxBytes    int64   `json:"max_bytes"`
	MeetsGoal   bool    `json:"meets_goal"`
	// AnonSamples and FileSamples split each sample into anonymous
	// memory and file-backed pages (the kernel's RssAnon and RssFile of
	// the process), when the engine runs on this host; empty otherwise.
	AnonSamples []int64 `json:"anon_samples_bytes,omitempty"`
	FileSamples []int64 `json:"file_samples_bytes,omitempty"`
}

// sample records container's berth-runtime resident set, and its split
// when the process is this host's.
func (m *memory) sample(t testing.TB, cli *client.Client, container string) {
	t.Helper()
	rss, pid := runtimeRSS(t, cli, container)
	m.Samples = append(m.Samples, rss)
	if anon, file, ok := rssSplit(pid); ok {
		m.AnonSamples = append(m.AnonSamples, anon)
		m.FileSamples = append(m.FileSamples, file)
	}
}

// rssSplit reads RssAnon and RssFile of host process pid from
// /proc/<pid>/status; ok is false when it cannot, or when this host's
// process pid is not berth-runtime (another host's engine).
func rssSplit(pid string) (anon, file int64, ok bool) {
	comm, err := os.ReadFile("/proc/" + pid + "/comm")
	if err != nil || strings.TrimSpace(string(comm)) != runtimeComm() {
		return 0, 0, false
	}
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, 0, false
	}
	var got int
	for line := range strings.Lines(string(data)) {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" || (k != "RssAnon" && k != "RssFile") {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, false
		}
		if k == "RssAnon" {
			anon = n << 10
		} else {
			file = n << 10
		}
		got++
	}
	return anon, file, got == 2
}

// runtimeComm is berth-runtime's process name as ps and /proc/PID/comm
// give it (the kernel keeps 15 characters).
func runtimeComm() string {
	name := path.Base(runtimebootstrap.BinaryPath)
	return name[:min(len(name), 15)]
}

// runtimeRSS reads the resident set of container's berth-runtime process
// (its RSS column, in KiB) and its host PID through the engine.
func runtimeRSS(t testing.TB, cli *client.Client, container string) (rss int64, pid string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sampleTimeout)
	defer cancel()
	top, err := cli.ContainerTop(ctx, container, client.ContainerTopOptions{Arguments: []string{"-o", "pid,rss,comm"}})
	if err != nil {
		t.Fatalf("container top: %v", err)
	}
	col, comm, pidCol := slices.Index(top.Titles, "RSS"), slices.Index(top.Titles, "COMMAND"), slices.Index(top.Titles, "PID")
	if col < 0 || comm < 0 || pidCol < 0 {
		t.Fatalf("container top titles %v", top.Titles)
	}
	for _, p := range top.Processes {
		if len(p) > max(col, comm, pidCol) && p[comm] == runtimeComm() {
			kib, err := strconv.ParseInt(p[col], 10, 64)
			if err != nil {
				t.Fatalf("RSS %q: %v", p[col], err)
			}
			return kib << 10, p[pidCol]
		}
	}
	t.Fatalf("no %s process in the container: %v", runtimeComm(), top.Processes)
	return 0, ""
}

// summarize fills the figures from the samples.
func (m *memory) summarize() {
	s := slices.Sorted(slices.Values(m.Samples))
	if len(s) == 0 {
		return
	}
	m.MedianBytes, m.MaxBytes = s[(len(s)-1)/2], s[len(s)-1]
	m.MeetsGoal = m.MaxBytes <= m.GoalBytes
}

// print writes the row after the table.
func (m *memory) print(w io.Writer) {
	verdict := "met"
	if !m.MeetsGoal {
		verdict = "missed"
	}
	fmt.Fprintf(w, "%s: median %.1f MiB, max %.1f MiB over %d Sessions; goal ≤%.0f MB: %s\n", m.Measure,
		float64(m.MedianBytes)/(1<<20), float64(m.MaxBytes)/(1<<20), len(m.Samples), float64(m.GoalBytes)/(1<<20), verdict)
	if len(m.AnonSamples) > 0 {
		mib := func(s []int64) float64 { return float64(slices.Sorted(slices.Values(s))[(len(s)-1)/2]) / (1 << 20) }
		fmt.Fprintf(w, "  of which (medians, the kernel's RssAnon / RssFile): anonymous %.1f MiB, file-backed %.1f MiB (berth-runtime's own pages, one copy in the host's page cache for every sandbox of the image)\n",
			mib(m.AnonSamples), mib(m.FileSamples))
	}
	fmt.Fprintln(w)
}
