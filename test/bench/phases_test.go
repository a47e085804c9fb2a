package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"berth.dev/test/internal/benchstat"
)

// phaseNames are P1's phases, in order: what separates a Session's
// commit from the client's sight of its admission, read from the times
// Core records on the database clock and the engine's start time of the
// container (issue 32, item 3).
var phaseNames = []string{
	"commit → Create claimed (the worker's wake, allocation, claim)",
	"Create claimed → container started (the node call, the adapter's Create, the engine's create and start)",
	"container started → Runtime connected (the process's start, its TLS dial, Hello and Core's acceptance)",
	"Runtime connected → prepared (the Runtime's preparation, its Prepared message)",
	"prepared → seen admitted by the client (the poll, every 5 ms)",
}

// P1's baseline has two of the phases too, from phaseToStart on: its start
// until the engine started its container, and from there until the
// container's process connected.
const (
	phaseToStart    = 1
	baselinePhases  = 2
	noBaselinePhase = -1
)

// phases is P1's breakdown: per phase, one duration per sample, and the
// baseline's own samples of the phases it has.
type phases struct {
	Names     []string    `json:"names"`
	MedianMS  []float64   `json:"median_ms"`
	MaxMS     []float64   `json:"max_ms"`
	SamplesMS [][]float64 `json:"samples_ms"`
	// BaselineMedianMS is the baseline's median of each phase it has
	// (phaseToStart, phaseToConnect), -1 for the others.
	BaselineMedianMS []float64 `json:"baseline_median_ms"`

	samples  [][]time.Duration
	baseline [baselinePhases][]time.Duration
}

func newPhases() *phases {
	return &phases{Names: phaseNames, samples: make([][]time.Duration, len(phaseNames))}
}

// addBaseline records one baseline sample's split: its start until the
// engine's StartedAt of its container, and from there until the
// container's process reached the listener.
func (p *phases) addBaseline(toStart, toConnect time.Duration) {
	p.baseline[0] = append(p.baseline[0], toStart)
	p.baseline[1] = append(p.baseline[1], toConnect)
}

// add reads the phases of Session name (sessions/<id>), which the client
// saw admitted at seen, from Core's database (dsn); started is when the
// engine started its container (the container's State.StartedAt). The
// engine, PostgreSQL and the client share this host's clock.
func (p *phases) add(t testing.TB, dsn, name string, started, seen time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("P1 phases: %v", err)
	}
	defer conn.Close(context.Background())
	var created, claimed, connected, prepared time.Time
	err = conn.QueryRow(ctx, `
		SELECT s.created_at, a.create_dispatched_at, c.connected_at, c.prepared_at
		FROM sessions s
		JOIN environments e ON e.session_id = s.id
		JOIN allocations a ON a.environment_id = e.id
		JOIN runtime_connections c ON c.allocation_id = a.id
		WHERE s.id = $1::uuid AND c.prepared_at IS NOT NULL
		ORDER BY c.connected_at LIMIT 1`, strings.TrimPrefix(name, "sessions/")).Scan(&created, &claimed, &connected, &prepared)
	if err != nil {
		t.Fatalf("P1 phases of %s: %v", name, err)
	}
	for i, d := range []time.Duration{claimed.Sub(created), started.Sub(claimed), connected.Sub(started), prepared.Sub(connected), seen.Sub(prepared)} {
		p.samples[i] = append(p.samples[i], d)
	}
}

func (p *phases) summarize() {
	p.MedianMS, p.MaxMS, p.SamplesMS, p.BaselineMedianMS = nil, nil, nil, nil
	for i, s := range p.samples {
		p.MedianMS = append(p.MedianMS, benchstat.Millis(benchstat.Percentile(s, 50)))
		p.MaxMS = append(p.MaxMS, benchstat.Millis(benchstat.Percentile(s, 100)))
		p.SamplesMS = append(p.SamplesMS, allMillis(s))
		b := float64(noBaselinePhase)
		if j := i - phaseToStart; j >= 0 && j < baselinePhases && len(p.baseline[j]) > 0 {
			b = benchstat.Millis(benchstat.Percentile(p.baseline[j], 50))
		}
		p.BaselineMedianMS = append(p.BaselineMedianMS, b)
	}
}

func (p *phases) print(w io.Writer) {
	fmt.Fprintln(w, "  P1 phases (median / max, ms, and the baseline's median where it has the phase; Core's database-clock times, the engine's StartedAt, this host's clock):")
	for i, n := range p.Names {
		base := "      -"
		if b := p.BaselineMedianMS[i]; b >= 0 {
			base = fmt.Sprintf("%7.1f", b)
		}
		fmt.Fprintf(w, "    %7.1f / %7.1f   %s  %s\n", p.MedianMS[i], p.MaxMS[i], base, n)
	}
	fmt.Fprintln(w)
}
