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
// Core records on the database clock (issue 32, item 3).
var phaseNames = []string{
	"commit → Create claimed (the worker's wake, allocation, claim)",
	"Create claimed → Runtime connected (the adapter's Create, the container's start, the Runtime's dial and Hello)",
	"Runtime connected → prepared (the Runtime's preparation, its Prepared message)",
	"prepared → seen admitted by the client (the poll, every 5 ms)",
}

// phases is P1's breakdown: per phase, one duration per sample.
type phases struct {
	Names     []string    `json:"names"`
	MedianMS  []float64   `json:"median_ms"`
	MaxMS     []float64   `json:"max_ms"`
	SamplesMS [][]float64 `json:"samples_ms"`

	samples [][]time.Duration
}

func newPhases() *phases {
	return &phases{Names: phaseNames, samples: make([][]time.Duration, len(phaseNames))}
}

// add reads the phases of Session name (sessions/<id>), which the client
// saw admitted at seen, from Core's database (dsn).
func (p *phases) add(t testing.TB, dsn, name string, seen time.Time) {
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
	for i, d := range []time.Duration{claimed.Sub(created), connected.Sub(claimed), prepared.Sub(connected), seen.Sub(prepared)} {
		p.samples[i] = append(p.samples[i], d)
	}
}

func (p *phases) summarize() {
	p.MedianMS, p.MaxMS, p.SamplesMS = nil, nil, nil
	for _, s := range p.samples {
		p.MedianMS = append(p.MedianMS, benchstat.Millis(benchstat.Percentile(s, 50)))
		p.MaxMS = append(p.MaxMS, benchstat.Millis(benchstat.Percentile(s, 100)))
		p.SamplesMS = append(p.SamplesMS, allMillis(s))
	}
}

func (p *phases) print(w io.Writer) {
	fmt.Fprintln(w, "  P1 phases (median / max, ms; Core's database-clock times; the last against this host's clock):")
	for i, n := range p.Names {
		fmt.Fprintf(w, "    %7.1f / %7.1f  %s\n", p.MedianMS[i], p.MaxMS[i], n)
	}
	fmt.Fprintln(w)
}
