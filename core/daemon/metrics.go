package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"berth.dev/platform/otelsetup"

	"berth.dev/core/nodes"
	"berth.dev/core/sessions"
	"berth.dev/core/store"
)

// Core's metrics (--metrics-listen; names in OpenTelemetry's form, and the
// Prometheus form the endpoint serves them in):
//
//	berth.sessions{state}                   berth_sessions                Sessions not yet deleted, by state (provisioning, active, failed, deleting)
//	berth.allocations{state}                berth_allocations             unreleased allocations, by state
//	berth.node.connected{node}              berth_node_connected          1 while the node is present (placement's predicate)
//	berth.node.ready{node}                  berth_node_ready              1 while the node is ready for the committed generation
//	berth.db.pool.connections{state}        berth_db_pool_connections     PostgreSQL pool connections: acquired, idle, constructing
//	berth.db.pool.connections.max           berth_db_pool_connections_max the pool's bound
//	berth.db.pool.acquires                  berth_db_pool_acquires_total  connections acquired from the pool
//	berth.db.pool.acquire.waits             berth_db_pool_acquire_waits_total acquisitions that had to wait
//	berth.db.pool.acquire.duration (s)      berth_db_pool_acquire_duration_seconds_total time spent acquiring
//
// and, from the packages Core composes: berth.lifecycle.operation.duration
// (core/lifecycle), berth.gateway.connections, berth.turn.queue.duration
// and berth.turn.run.duration (core/gateway), berth.audit.write.failures
// {cause} (core/audit: events not recorded), and otelgrpc's
// rpc.server.call.duration and rpc.client.call.duration of the admin API,
// the Runtime gateway and the node-protocol client. The Session and
// allocation counts are database reads: each runs at most once per
// metricsRefresh whatever the scrape rate, bounded by metricsQueryTimeout;
// the others read memory. No label carries anything but a fixed state
// name or a node's id.

// meterName is the instrumentation scope of the gauges below.
const meterName = "berth.dev/core/daemon"

// The states the count gauges always report (0 when none), so a series
// does not vanish when its last Session or allocation leaves the state.
var (
	sessionStates    = []sessions.State{sessions.StateProvisioning, sessions.StateActive, sessions.StateFailed, sessions.StateDeleting, sessions.StateArchived}
	allocationStates = []store.AllocationState{
		store.AllocationAllocated, store.AllocationCreateDispatched, store.AllocationCreateUnknown, store.AllocationRunning,
		store.AllocationCreateFailed, store.AllocationCleanupRequested, store.AllocationCleanupUnknown, store.AllocationCleanupConfirmed,
	}
)

// setupMetrics serves the metrics endpoint on MetricsListen, when set. It
// installs the process's MeterProvider before anything that records is
// built (the node connections', gateway's and admin API's otelgrpc
// handlers, the lifecycle workers, the gateway), and its stop, which runs
// after theirs, closes the endpoint and then the provider.
func (c *core) setupMetrics(ctx context.Context) error {
	if c.cfg.MetricsListen == "" {
		return nil
	}
	m, err := otelsetup.StartMetrics(ctx, otelsetup.CoreService, c.cfg.Version, c.log)
	if err != nil {
		return err
	}
	c.group.onStop(func() {
		sctx, cancel := context.WithTimeout(context.Background(), metricsStopTimeout)
		defer cancel()
		_ = m.Shutdown(sctx)
	})
	c.metricsLis, err = c.group.listenHTTP("metrics", c.cfg.MetricsListen, m.Server())
	if err != nil {
		return err
	}
	c.metrics = m
	return nil
}

// observeCore registers the gauges of Core's state (the list above): the
// counts from the database, node presence, the connection pool.
func (c *core) observeCore(context.Context) error {
	if c.metrics == nil {
		return nil
	}
	reg, err := registerGauges(otel.Meter(meterName), &dbCounts{sessions: c.sessions, store: c.owned.reader, refresh: metricsRefresh},
		c.manager, c.st.Pool())
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	c.group.onStop(func() { _ = reg.Unregister() })
	return nil
}

// dbCounts caches the counts read from the database for refresh, so a
// scrape storm costs at most one pair of queries per refresh.
type dbCounts struct {
	sessions interface {
		CountByState(ctx context.Context) (map[sessions.State]int64, error)
	}
	store interface {
		CountUnreleasedAllocations(ctx context.Context) (map[store.AllocationState]int64, error)
		NodePresences(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]store.NodePresence, error)
	}
	refresh time.Duration

	mu           sync.Mutex
	at           time.Time
	bySession    map[sessions.State]int64
	byAllocation map[store.AllocationState]int64
}

// read returns the counts, read again when older than refresh. A failed
// read reports nothing (rather than stale counts) and is retried at the
// next scrape.
func (d *dbCounts) read(ctx context.Context) (map[sessions.State]int64, map[store.AllocationState]int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.at.IsZero() && time.Since(d.at) < d.refresh {
		return d.bySession, d.byAllocation, nil
	}
	qctx, cancel := context.WithTimeout(ctx, metricsQueryTimeout)
	defer cancel()
	s, err := d.sessions.CountByState(qctx)
	if err != nil {
		return nil, nil, fmt.Errorf("count sessions: %w", err)
	}
	a, err := d.store.CountUnreleasedAllocations(qctx)
	if err != nil {
		return nil, nil, fmt.Errorf("count allocations: %w", err)
	}
	d.at, d.bySession, d.byAllocation = time.Now(), s, a
	return s, a, nil
}

// registerGauges makes the gauges and the one callback that observes them.
func registerGauges(meter metric.Meter, counts *dbCounts, m *nodes.Manager, pool *pgxpool.Pool) (metric.Registration, error) {
	var errs []error
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		opts := []metric.Int64ObservableGaugeOption{metric.WithDescription(desc)}
		if unit != "" {
			opts = append(opts, metric.WithUnit(unit))
		}
		g, err := meter.Int64ObservableGauge(name, opts...)
		errs = append(errs, err)
		return g
	}
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		g, err := meter.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	sessionGauge := gauge("berth.sessions", "{session}", "Sessions whose deletion has not completed, by state.")
	allocGauge := gauge("berth.allocations", "{allocation}", "Unreleased allocations, by state.")
	// The node gauges are 0 or 1 and have no unit (a unit of "1" would
	// make them berth_node_*_ratio in Prometheus).
	connected := gauge("berth.node.connected", "", "1 while the node is present (Core holds its connection and its latest health report is younger than 45 s: the predicate placement applies), else 0.")
	ready := gauge("berth.node.ready", "", "1 while the node reports itself ready for the committed deployment generation, else 0.")
	poolConns := gauge("berth.db.pool.connections", "{connection}", "PostgreSQL pool connections, by state (acquired, idle, constructing).")
	poolMax := gauge("berth.db.pool.connections.max", "{connection}", "The PostgreSQL pool's maximum size.")
	acquires := counter("berth.db.pool.acquires", "{acquire}", "Connections acquired from the PostgreSQL pool.")
	waits := counter("berth.db.pool.acquire.waits", "{acquire}", "Acquisitions that waited for a connection (the pool was empty).")
	acquireTime, err := meter.Float64ObservableCounter("berth.db.pool.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("Total time spent acquiring connections from the PostgreSQL pool."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	state := func(s string) metric.ObserveOption { return metric.WithAttributes(attribute.String("state", s)) }
	return meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		st := pool.Stat()
		o.ObserveInt64(poolConns, int64(st.AcquiredConns()), state("acquired"))
		o.ObserveInt64(poolConns, int64(st.IdleConns()), state("idle"))
		o.ObserveInt64(poolConns, int64(st.ConstructingConns()), state("constructing"))
		o.ObserveInt64(poolMax, int64(st.MaxConns()))
		o.ObserveInt64(acquires, st.AcquireCount())
		o.ObserveInt64(waits, st.EmptyAcquireCount())
		o.ObserveFloat64(acquireTime, st.AcquireDuration().Seconds())

		// Presence is the database's predicate (the one placement
		// applies); a failed read reports no presence gauge this time.
		ids := m.Nodes()
		qctx, cancel := context.WithTimeout(ctx, metricsQueryTimeout)
		present, perr := counts.store.NodePresences(qctx, ids)
		cancel()
		for _, id := range ids {
			p := m.Presence(id)
			node := metric.WithAttributes(attribute.String("node", id.String()))
			if perr == nil {
				o.ObserveInt64(connected, boolInt(present[id].Present), node)
			}
			o.ObserveInt64(ready, boolInt(p.Readiness.GetReady()), node)
		}

		bySession, byAllocation, err := counts.read(ctx)
		if err != nil {
			return err // the pool and node gauges above are still reported
		}
		for _, s := range sessionStates {
			o.ObserveInt64(sessionGauge, bySession[s], state(s.String()))
		}
		for _, s := range allocationStates {
			o.ObserveInt64(allocGauge, byAllocation[s], state(string(s)))
		}
		return nil
	}, sessionGauge, allocGauge, connected, ready, poolConns, poolMax, acquires, waits, acquireTime)
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
