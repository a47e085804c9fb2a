package storeobs

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"berth.dev/core/store/pgerr"
	"berth.dev/sandbox/errdefs"
)

// ScopeName is the instrumentation scope of the store's spans and
// histogram.
const ScopeName = "berth.dev/core/store"

// Duration is the name of the call-duration histogram.
const Duration = "berth.store.call.duration"

// callBuckets are the histogram's bounds in seconds: from an indexed read
// (sub-millisecond) to a transaction that waited on a lock (seconds).
var callBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Observer holds the tracer and the histogram the wrappers record with.
type Observer struct {
	tracer trace.Tracer
	calls  metric.Float64Histogram
}

// New returns an Observer on the global OpenTelemetry providers (no-ops
// unless the daemon installed them).
func New() *Observer { return NewWith(otel.GetTracerProvider(), otel.GetMeterProvider()) }

// NewWith returns an Observer on tp and mp.
func NewWith(tp trace.TracerProvider, mp metric.MeterProvider) *Observer {
	o := &Observer{tracer: tp.Tracer(ScopeName)}
	calls, err := mp.Meter(ScopeName).Float64Histogram(Duration,
		metric.WithDescription("Duration of a store call, by view type, method and outcome class."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(callBuckets...))
	if err != nil {
		otel.Handle(err)
	}
	o.calls = calls
	return o
}

// call is one observed store call.
type call struct {
	o            *Observer
	span         trace.Span
	view, method string
	start        time.Time
}

// start begins the span of view.method under ctx.
func (o *Observer) start(ctx context.Context, view, method string) (context.Context, call) {
	ctx, span := o.tracer.Start(ctx, "store."+view+"."+method, trace.WithSpanKind(trace.SpanKindClient))
	return ctx, call{o: o, span: span, view: view, method: method, start: time.Now()}
}

// end records the call's outcome class (of err) on its span and its
// duration, and ends the span.
func (c call) end(ctx context.Context, err error) {
	outcome := Outcome(err)
	c.span.SetAttributes(attribute.String("method", c.method), attribute.String("outcome", outcome))
	if err != nil {
		c.span.SetStatus(codes.Error, outcome)
	}
	c.span.End()
	if c.o.calls != nil {
		c.o.calls.Record(ctx, time.Since(c.start).Seconds(), metric.WithAttributes(
			attribute.String("type", c.view), attribute.String("method", c.method), attribute.String("outcome", outcome)))
	}
}

// classes name the outcome classes, first match wins.
var classes = []struct {
	err  error
	name string
}{
	{errdefs.ErrInvalid, "invalid"},
	{errdefs.ErrOwnership, "ownership"},
	{errdefs.ErrExists, "exists"},
	{errdefs.ErrNotFound, "not_found"},
	{errdefs.ErrComputeUnconfirmed, "compute_unconfirmed"},
	{errdefs.ErrCommandUnconfirmed, "command_unconfirmed"},
	{errdefs.ErrUnsupported, "unsupported"},
	{errdefs.ErrObservationUnavailable, "observation_unavailable"},
	{errdefs.ErrRuntimeNotRunning, "runtime_not_running"},
	{errdefs.ErrProtocolMismatch, "protocol_mismatch"},
	{errdefs.ErrFenced, "fenced"},
	{errdefs.ErrFailedPrecondition, "failed_precondition"},
	{errdefs.ErrContract, "contract"},
	{pgerr.ErrRetryable, "retryable"},
	{context.Canceled, "canceled"},
	{context.DeadlineExceeded, "deadline_exceeded"},
}

// Outcome is err's class as a fixed name: "ok" for nil, the errdefs class
// (or retryable, canceled, deadline_exceeded), else "unknown". It never
// carries the error's text.
func Outcome(err error) string {
	if err == nil {
		return "ok"
	}
	for _, c := range classes {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return "unknown"
}
