package gateway

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"berth.dev/core/store"
)

// Telemetry of the gateway, through the global OpenTelemetry providers
// (no-ops unless berth-core installed them, platform/otelsetup):
//
//	metric berth.gateway.connections    Runtime connections open (up-down counter)
//	metric berth.turn.queue.duration    (s) submission to dispatch of each Turn
//	metric berth.turn.run.duration      (s) dispatch to recorded result {state}
//	span   turn                         a Turn from its dispatch to its result
//
// A Turn's span starts a trace of its own, linked to its connection's
// (a connection lives for days and carries many Turns). It names the
// Session and the Turn; never the command, its environment, its input or
// its output. Both durations are differences of database clock readings
// (the Turn's recorded times), like every lifecycle decision.

// scopeName is the instrumentation scope of the gateway's spans and
// instruments.
const scopeName = "berth.dev/core/gateway"

// turnBuckets are the Turn histograms' bounds in seconds: from a Turn
// dispatched at once (milliseconds) to the default queue timeout and long
// Turns (hours).
var turnBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400}

type telemetry struct {
	tracer      trace.Tracer
	connections metric.Int64UpDownCounter
	queue, run  metric.Float64Histogram
}

func newTelemetry() telemetry {
	meter := otel.Meter(scopeName)
	t := telemetry{tracer: otel.Tracer(scopeName)}
	var err error
	if t.connections, err = meter.Int64UpDownCounter("berth.gateway.connections",
		metric.WithDescription("Runtime connections the gateway holds open (admitted, not yet closed)."),
		metric.WithUnit("{connection}")); err != nil {
		otel.Handle(err)
	}
	if t.queue, err = meter.Float64Histogram("berth.turn.queue.duration",
		metric.WithDescription("Time a Turn waited between its submission and its dispatch to the Runtime."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(turnBuckets...)); err != nil {
		otel.Handle(err)
	}
	if t.run, err = meter.Float64Histogram("berth.turn.run.duration",
		metric.WithDescription("Time between a Turn's dispatch and its recorded result, by the Turn's final state."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(turnBuckets...)); err != nil {
		otel.Handle(err)
	}
	return t
}

// connected counts an admitted connection; closed its end.
func (t telemetry) connected(ctx context.Context) {
	if t.connections != nil {
		t.connections.Add(ctx, 1)
	}
}

func (t telemetry) closed(ctx context.Context) {
	if t.connections != nil {
		t.connections.Add(ctx, -1)
	}
}

// dispatched starts the span of claimed Turn tn, linked to the connection's
// context ctx, and records its queue wait.
func (t telemetry) dispatched(ctx context.Context, tn store.Turn) trace.Span {
	if t.queue != nil && tn.DispatchedAt != nil {
		t.queue.Record(ctx, seconds(tn.DispatchedAt.Sub(tn.CreatedAt)))
	}
	_, span := t.tracer.Start(context.Background(), "turn",
		trace.WithNewRoot(), trace.WithLinks(trace.LinkFromContext(ctx)),
		trace.WithAttributes(attribute.String("berth.session", tn.SessionID.String()), attribute.String("berth.turn", tn.ID.String())))
	return span
}

// finished records the run time of Turn tn, whose result was recorded, and
// ends its span.
func (t telemetry) finished(ctx context.Context, span trace.Span, tn store.Turn) {
	state := string(tn.State)
	if t.run != nil && tn.DispatchedAt != nil && tn.EndedAt != nil {
		t.run.Record(ctx, seconds(tn.EndedAt.Sub(*tn.DispatchedAt)), metric.WithAttributes(attribute.String("state", state)))
	}
	if span != nil {
		span.SetAttributes(attribute.String("berth.turn.state", state))
		if tn.State == store.TurnFailed || tn.State == store.TurnUnconfirmed {
			span.SetStatus(codes.Error, state)
		}
		span.End()
	}
}

// lost ends the span of a Turn whose connection ended before its result:
// the Turn is unconfirmed.
func (t telemetry) lost(span trace.Span) {
	if span != nil {
		state := string(store.TurnUnconfirmed)
		span.SetAttributes(attribute.String("berth.turn.state", state))
		span.SetStatus(codes.Error, state)
		span.End()
	}
}

func seconds(d time.Duration) float64 { return max(d, 0).Seconds() }
