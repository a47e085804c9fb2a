package lifecycle

import (
	"context"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Telemetry of the lifecycle worker: a span and a duration around each
// provider operation the worker performs (not around the scans that find
// nothing to do), recorded through the global OpenTelemetry providers,
// which are no-ops unless berth-core installed them (platform/otelsetup).
//
//	span   lifecycle.<operation>   attributes berth.node (berth.lane=direct on the direct lane), berth.allocation
//	metric berth.lifecycle.operation.duration (s) {operation, outcome}
//
// The operations: create (the claimed Create and the record of its
// outcome), kill (a cleanup's Kill and its record), observe (GetInfo,
// GetCompute of running compute or of an unknown creation), observe_batch
// (the node protocol's ObserveBatch for a page of running compute; its
// span has no berth.allocation but berth.targets, their count), keepalive
// (Renew), capture and capture_observe (Suspend, ObserveOnly), restore and
// restore_observe (Resume, ObserveOnly). The outcome is ok, or error when
// the provider call or the record failed; an error's text is never
// recorded (a span's status says only "error"), nor any credential.
// The node-protocol call under an operation is its child span, and the
// node agent's server span a child of that (core/nodes.Dial).

// scopeName is the instrumentation scope of the worker's spans and
// instruments.
const scopeName = "berth.dev/core/lifecycle"

// The operation names (the operation attribute and the span names).
const (
	opCreate         = "create"
	opKill           = "kill"
	opObserve        = "observe"
	opObserveBatch   = "observe_batch"
	opKeepalive      = "keepalive"
	opCapture        = "capture"
	opCaptureObserve = "capture_observe"
	opRestore        = "restore"
	opRestoreObserve = "restore_observe"
)

// durationBuckets are the histogram's bounds in seconds: from a quick
// observation (milliseconds) to a slow Create or capture (minutes; the
// call bound is DefaultCallTimeout).
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// telemetry is a worker's tracer and instruments, made from the global
// providers when the worker is made.
type telemetry struct {
	tracer   trace.Tracer
	duration metric.Float64Histogram
}

func newTelemetry() telemetry {
	h, err := otel.Meter(scopeName).Float64Histogram("berth.lifecycle.operation.duration",
		metric.WithDescription("Duration of lifecycle worker operations on a node's provider, by operation and outcome."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err != nil {
		otel.Handle(err)
	}
	return telemetry{tracer: otel.Tracer(scopeName), duration: h}
}

// laneAttribute names the worker's lane on a span: berth.lane=direct for
// the direct lane, berth.node=<id> for a node.
func laneAttribute(lane uuid.UUID) attribute.KeyValue {
	if lane == DirectLane {
		return attribute.String("berth.lane", "direct")
	}
	return attribute.String("berth.node", lane.String())
}

// operation starts operation op of node's worker on allocation id: ctx
// carries its span, and end (called once, with the operation's error)
// records its duration and outcome and ends the span.
func (t telemetry) operation(ctx context.Context, op string, node, id uuid.UUID) (_ context.Context, end func(error)) {
	return t.operationWith(ctx, op, laneAttribute(node), attribute.String("berth.allocation", id.String()))
}

// operationWith is operation with the span's attributes given.
func (t telemetry) operationWith(ctx context.Context, op string, attrs ...attribute.KeyValue) (_ context.Context, end func(error)) {
	start := time.Now()
	ctx, span := t.tracer.Start(ctx, "lifecycle."+op, trace.WithAttributes(attrs...))
	return ctx, func(err error) {
		outcome := "ok"
		if err != nil {
			outcome = "error"
			span.SetStatus(codes.Error, outcome)
		}
		if t.duration != nil {
			t.duration.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(
				attribute.String("operation", op), attribute.String("outcome", outcome)))
		}
		span.End()
	}
}
