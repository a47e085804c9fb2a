package lifecycle_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"berth.dev/core/lifecycle"
	"berth.dev/core/projects"
	"berth.dev/core/store"
	"berth.dev/sandbox/docker/dockertest"
)

// telemetryProviders installs SDK providers as the globals for the test:
// spans into an in-memory exporter, metrics into a manual reader. The
// test's cleanup puts no-op providers back.
func telemetryProviders(t *testing.T) (*tracetest.InMemoryExporter, *sdkmetric.ManualReader) {
	t.Helper()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	otel.SetTracerProvider(tp)
	otel.SetMeterProvider(mp)
	t.Cleanup(func() {
		otel.SetTracerProvider(tracenoop.NewTracerProvider())
		otel.SetMeterProvider(metricnoop.NewMeterProvider())
	})
	return spans, reader
}

// operationCounts reads the lifecycle duration histogram's counts by
// (operation, outcome).
func operationCounts(t *testing.T, reader *sdkmetric.ManualReader) map[[2]string]uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	must(t, reader.Collect(context.Background(), &rm))
	out := map[[2]string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "berth.lifecycle.operation.duration" {
				continue
			}
			if m.Unit != "s" {
				t.Errorf("unit %q, want s", m.Unit)
			}
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				t.Fatalf("%s is %T, want a float64 histogram", m.Name, m.Data)
			}
			for _, dp := range h.DataPoints {
				op, _ := dp.Attributes.Value("operation")
				outcome, _ := dp.Attributes.Value("outcome")
				if dp.Attributes.Len() != 2 {
					t.Errorf("data point attributes %v, want operation and outcome only", dp.Attributes.ToSlice())
				}
				out[[2]string{op.AsString(), outcome.AsString()}] += dp.Count
			}
		}
	}
	return out
}

// TestOperationsAreTracedAndTimed: a Create, a failed Create and a Kill
// each get a span named after the operation, with the node and the
// allocation, and a duration by operation and outcome; a pass with nothing
// to do records nothing.
func TestOperationsAreTracedAndTimed(t *testing.T) {
	spans, reader := telemetryProviders(t)
	e := newEnv(t, 1)
	n := e.only(t)
	w := lifecycle.NewWorker(e.cfg, n.id)

	pass(t, w) // nothing to do
	if got := names(spans); len(got) != 0 {
		t.Fatalf("an idle pass made spans: %v", got)
	}

	ok := e.createBundle(t, n.id)
	pass(t, w)
	if got := e.alloc(t, ok.Allocation.ID); got.State != store.AllocationRunning {
		t.Fatalf("allocation %s", got.State)
	}
	n.srv.Arm(dockertest.CallContainerCreate, dockertest.FaultDrop, nil)
	failed := e.createSession(t, n.id)
	pass(t, w)
	if got := e.alloc(t, failed.ID); got.State != store.AllocationCreateUnknown {
		t.Fatalf("dropped Create: %s", got.State)
	}
	_, err := e.svc.Delete(context.Background(), projects.All(), ok.Session.ID)
	must(t, err)
	pass(t, w)
	if got := e.alloc(t, ok.Allocation.ID); got.State != store.AllocationReleased {
		t.Fatalf("deleted Session's allocation: %s", got.State)
	}

	byName := map[string][]tracetest.SpanStub{}
	var engine []tracetest.SpanStub // the Docker client's (otelhttp)
	for _, s := range spans.GetSpans() {
		if s.InstrumentationScope.Name != "berth.dev/core/lifecycle" {
			engine = append(engine, s)
			continue
		}
		byName[s.Name] = append(byName[s.Name], s)
		for _, kv := range s.Attributes {
			if kv.Key != "berth.node" && kv.Key != "berth.allocation" {
				t.Errorf("span %s has attribute %s", s.Name, kv.Key)
			}
		}
	}
	creates := byName["lifecycle.create"]
	if len(creates) != 2 {
		t.Fatalf("%d create spans, want 2 (spans: %v)", len(creates), names(spans))
	}
	for i, want := range []struct {
		alloc string
		code  codes.Code
	}{{ok.Allocation.ID.String(), codes.Unset}, {failed.ID.String(), codes.Error}} {
		s := creates[i]
		if !hasAttr(s.Attributes, "berth.allocation", want.alloc) || !hasAttr(s.Attributes, "berth.node", n.id.String()) {
			t.Errorf("create span %d attributes %v, want allocation %s on node %s", i, s.Attributes, want.alloc, n.id)
		}
		if s.Status.Code != want.code {
			t.Errorf("create span %d status %v, want %v", i, s.Status, want.code)
		}
	}
	if kills := byName["lifecycle.kill"]; len(kills) != 1 || !hasAttr(kills[0].Attributes, "berth.allocation", ok.Allocation.ID.String()) {
		t.Errorf("kill spans %v", kills)
	}
	// The adapter's engine calls under the Create are children of its
	// span: the context reaches the provider.
	children := 0
	for _, s := range engine {
		if s.Parent.SpanID() == creates[0].SpanContext.SpanID() && s.SpanContext.TraceID() == creates[0].SpanContext.TraceID() {
			children++
		}
	}
	if children == 0 {
		t.Errorf("no engine call is a child of the create span (%d engine spans)", len(engine))
	}

	counts := operationCounts(t, reader)
	for key, want := range map[[2]string]uint64{
		{"create", "ok"}: 1, {"create", "error"}: 1, {"kill", "ok"}: 1,
	} {
		if counts[key] != want {
			t.Errorf("duration count %v = %d, want %d (all: %v)", key, counts[key], want, counts)
		}
	}
}

func hasAttr(kvs []attribute.KeyValue, key, value string) bool {
	for _, kv := range kvs {
		if string(kv.Key) == key && kv.Value.AsString() == value {
			return true
		}
	}
	return false
}

// names are the names of the lifecycle worker's spans e holds.
func names(e *tracetest.InMemoryExporter) []string {
	var out []string
	for _, s := range e.GetSpans() {
		if s.InstrumentationScope.Name == "berth.dev/core/lifecycle" {
			out = append(out, s.Name)
		}
	}
	return out
}
