package gateway_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	otelcodes "go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	runtimev1 "berth.dev/proto/berth/runtime/v1"

	"berth.dev/core/store"
)

// metricsOf collects reader and returns the gateway's instruments by name.
func metricsOf(t *testing.T, reader *sdkmetric.ManualReader) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != "berth.dev/core/gateway" {
			continue
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

func connections(t *testing.T, reader *sdkmetric.ManualReader) int64 {
	t.Helper()
	sum, ok := metricsOf(t, reader)["berth.gateway.connections"].(metricdata.Sum[int64])
	if !ok || sum.IsMonotonic || len(sum.DataPoints) != 1 {
		t.Fatalf("berth.gateway.connections: %#v", sum)
	}
	return sum.DataPoints[0].Value
}

// TestTurnsAndConnectionsAreMeasured: a connection counts while it is
// open; each Turn gets a span of its own from dispatch to result (a new
// trace) naming only the Session and the Turn, its queue wait, and, once
// its result is recorded, its run time by final state; a Turn cut off by
// the connection's end ends its span unconfirmed.
func TestTurnsAndConnectionsAreMeasured(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	reader := sdkmetric.NewManualReader()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)))
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	t.Cleanup(func() {
		otel.SetTracerProvider(tracenoop.NewTracerProvider())
		otel.SetMeterProvider(metricnoop.NewMeterProvider())
	})

	f := newFixture(t, time.Minute)
	first := f.submit(t, "echo one", map[string]string{"SECRET": "s3"}, nil)
	second := f.submit(t, "echo two", nil, nil)
	s, _ := f.connect(t)
	if n := connections(t, reader); n != 1 {
		t.Fatalf("%d connections while one is open", n)
	}
	send(t, s, prepared())
	id := next(t, s).GetRunTurn().GetTurnId()
	send(t, s, &runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_TurnResult{TurnResult: &runtimev1.TurnResult{
		TurnId: id, Outcome: runtimev1.TurnResult_OUTCOME_EXITED, ExitCode: 3}}})
	if m := next(t, s).GetRunTurn(); m.GetTurnId() != second.ID.String() {
		t.Fatalf("second delivery %v", m)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	waitState(t, f.st, second.ID, store.TurnUnconfirmed)
	deadline := time.Now().Add(10 * time.Second)
	for connections(t, reader) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the closed connection is still counted")
		}
		time.Sleep(20 * time.Millisecond)
	}

	var turnSpans []tracetest.SpanStub
	for _, sp := range spans.GetSpans() {
		if sp.Name == "turn" {
			turnSpans = append(turnSpans, sp)
		}
	}
	if len(turnSpans) != 2 {
		t.Fatalf("%d turn spans, want 2", len(turnSpans))
	}
	for i, want := range []struct {
		turn, state string
		code        otelcodes.Code
	}{{first.ID.String(), "completed", otelcodes.Unset}, {second.ID.String(), "unconfirmed", otelcodes.Error}} {
		sp := turnSpans[i]
		attrs := map[string]string{}
		for _, kv := range sp.Attributes {
			attrs[string(kv.Key)] = kv.Value.AsString()
		}
		if attrs["berth.turn"] != want.turn || attrs["berth.session"] != f.session.Session.ID.String() ||
			attrs["berth.turn.state"] != want.state || len(attrs) != 3 {
			t.Errorf("turn span %d attributes %v, want turn %s in state %s (and nothing else)", i, attrs, want.turn, want.state)
		}
		if sp.Status.Code != want.code {
			t.Errorf("turn span %d status %v, want %v", i, sp.Status, want.code)
		}
		if sp.Parent.IsValid() {
			t.Errorf("turn span %d has a parent: a Turn starts its own trace", i)
		}
	}

	ms := metricsOf(t, reader)
	queue, ok := ms["berth.turn.queue.duration"].(metricdata.Histogram[float64])
	if !ok || len(queue.DataPoints) != 1 || queue.DataPoints[0].Count != 2 {
		t.Errorf("berth.turn.queue.duration: %#v, want 2 Turns", ms["berth.turn.queue.duration"])
	}
	run, ok := ms["berth.turn.run.duration"].(metricdata.Histogram[float64])
	if !ok || len(run.DataPoints) != 1 || run.DataPoints[0].Count != 1 {
		t.Fatalf("berth.turn.run.duration: %#v, want the one finished Turn", ms["berth.turn.run.duration"])
	}
	if v, _ := run.DataPoints[0].Attributes.Value("state"); v.AsString() != "completed" || run.DataPoints[0].Attributes.Len() != 1 {
		t.Errorf("run duration attributes %v, want state=completed", run.DataPoints[0].Attributes.ToSlice())
	}
}
