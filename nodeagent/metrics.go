package nodeagent

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"berth.dev/platform/otelsetup"
)

// meterName is the instrumentation scope of the node agent's own
// instruments (otelgrpc has its own).
const meterName = "berth.dev/nodeagent"

// setupMetrics serves the metrics endpoint on cfg.MetricsListen, when set:
// it installs the process's MeterProvider before the node protocol's
// server is built, so otelgrpc's call metrics record into it. Its stop
// closes the endpoint (scrapes in flight get metricsStopTimeout) and
// then the provider.
func (p *process) setupMetrics(ctx context.Context) error {
	if p.cfg.MetricsListen == "" {
		return nil
	}
	m, err := otelsetup.StartMetrics(ctx, otelsetup.NodeAgentService, p.cfg.Version, p.log)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", p.cfg.MetricsListen)
	if err != nil {
		_ = m.Shutdown(ctx)
		return fmt.Errorf("metrics listen: %w", err)
	}
	p.metrics, p.metricsSrv, p.metricsLis = m, m.Server(), lis
	p.onStop(func() {
		sctx, cancel := context.WithTimeout(context.Background(), metricsStopTimeout)
		defer cancel()
		_ = p.metricsSrv.Shutdown(sctx)
		_ = p.metricsSrv.Close()
		_ = lis.Close() // in case it was never served
		_ = m.Shutdown(sctx)
	})
	return nil
}

// observeServer registers the node's gauges, read at each scrape from
// what the process holds (no adapter or engine call):
//
//	berth.nodeagent.generations{ready}       generations served, by readiness
//	berth.nodeagent.operations.active        operations in flight
//	berth.nodeagent.creation_receipts.held   creation-absence receipts the adapters keep (Docker tombstones)
//
// The calls themselves (rpc.server.call.duration by method and code) are
// otelgrpc's.
func (p *process) observeServer(context.Context) error {
	if p.metrics == nil {
		return nil
	}
	meter := otel.Meter(meterName)
	gens, err := meter.Int64ObservableGauge("berth.nodeagent.generations",
		metric.WithDescription("Deployment generations the node serves, by readiness (the latest probe's)."),
		metric.WithUnit("{generation}"))
	if err != nil {
		return err
	}
	active, err := meter.Int64ObservableGauge("berth.nodeagent.operations.active",
		metric.WithDescription("Provider operations in flight over every served generation."),
		metric.WithUnit("{operation}"))
	if err != nil {
		return err
	}
	held, err := meter.Int64ObservableGauge("berth.nodeagent.creation_receipts.held",
		metric.WithDescription("Resources the adapters keep only as creation-absence receipts (Docker: tombstones) until they can prove that no request of the Create can reach the backend (as of the latest health report)."),
		metric.WithUnit("{receipt}"))
	if err != nil {
		return err
	}
	ready, notReady := metric.WithAttributes(attribute.String("ready", strconv.FormatBool(true))),
		metric.WithAttributes(attribute.String("ready", strconv.FormatBool(false)))
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		var up, down int64
		for _, st := range p.gens.Statuses() {
			if st.GetReadiness().GetReady() {
				up++
			} else {
				down++
			}
		}
		o.ObserveInt64(gens, up, ready)
		o.ObserveInt64(gens, down, notReady)
		o.ObserveInt64(active, int64(p.gens.Active()))
		o.ObserveInt64(held, int64(p.gens.ReceiptsHeld()))
		return nil
	}, gens, active, held)
	if err != nil {
		return err
	}
	p.onStop(func() { _ = reg.Unregister() })
	return nil
}
