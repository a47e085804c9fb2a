package bench

import (
	"context"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
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
}

// runtimeRSS reads the resident set of container's berth-runtime process
// (its RSS column, in KiB) through the engine.
func runtimeRSS(t testing.TB, cli *client.Client, container string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sampleTimeout)
	defer cancel()
	top, err := cli.ContainerTop(ctx, container, client.ContainerTopOptions{Arguments: []string{"-o", "pid,rss,comm"}})
	if err != nil {
		t.Fatalf("container top: %v", err)
	}
	rss, comm := slices.Index(top.Titles, "RSS"), slices.Index(top.Titles, "COMMAND")
	if rss < 0 || comm < 0 {
		t.Fatalf("container top titles %v", top.Titles)
	}
	name := path.Base(runtimebootstrap.BinaryPath)
	for _, p := range top.Processes {
		if len(p) > max(rss, comm) && p[comm] == name[:min(len(name), 15)] {
			kib, err := strconv.ParseInt(p[rss], 10, 64)
			if err != nil {
				t.Fatalf("RSS %q: %v", p[rss], err)
			}
			return kib << 10
		}
	}
	t.Fatalf("no %s process in the container: %v", name, top.Processes)
	return 0
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
	fmt.Fprintf(w, "%s: median %.1f MiB, max %.1f MiB over %d Sessions; goal ≤%.0f MB: %s\n\n", m.Measure,
		float64(m.MedianBytes)/(1<<20), float64(m.MaxBytes)/(1<<20), len(m.Samples), float64(m.GoalBytes)/(1<<20), verdict)
}
