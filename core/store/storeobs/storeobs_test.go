package storeobs_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"berth.dev/core/store"
	"berth.dev/core/store/storeobs"
	"berth.dev/core/store/storetest"
)

// recorder is an Observer on an in-memory span exporter and a manual
// metric reader.
type recorder struct {
	obs    *storeobs.Observer
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
}

func newRecorder() recorder {
	spans := tracetest.NewInMemoryExporter()
	reader := sdkmetric.NewManualReader()
	obs := storeobs.NewWith(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)),
		sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	return recorder{obs: obs, spans: spans, reader: reader}
}

// samples returns the call-duration histogram's points, by their
// attributes.
func (r recorder) samples(t *testing.T) map[attribute.Distinct]metricdata.HistogramDataPoint[float64] {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[attribute.Distinct]metricdata.HistogramDataPoint[float64]{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sm.Scope.Name != storeobs.ScopeName || m.Name != storeobs.Duration {
				t.Errorf("unexpected instrument %s/%s", sm.Scope.Name, m.Name)
				continue
			}
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				t.Fatalf("%s is %T, want a float64 histogram", m.Name, m.Data)
			}
			for _, p := range h.DataPoints {
				out[p.Attributes.Equivalent()] = p
			}
		}
	}
	return out
}

// wantCall: exactly one span named name with the method and outcome
// attributes only, and one histogram sample of type, method and outcome.
func (r recorder) wantCall(t *testing.T, typ, method, outcome string) {
	t.Helper()
	got := r.spans.GetSpans()
	if len(got) != 1 {
		t.Fatalf("%d spans, want 1", len(got))
	}
	s := got[0]
	if want := "store." + typ + "." + method; s.Name != want {
		t.Errorf("span %q, want %q", s.Name, want)
	}
	wantAttrs := attribute.NewSet(attribute.String("method", method), attribute.String("outcome", outcome))
	if set := attribute.NewSet(s.Attributes...); !set.Equals(&wantAttrs) {
		t.Errorf("span attributes %v, want %v", s.Attributes, wantAttrs.ToSlice())
	}
	if wantErr := outcome != "ok"; (s.Status.Code == codes.Error) != wantErr || (wantErr && s.Status.Description != outcome) {
		t.Errorf("span status %v %q for outcome %s", s.Status.Code, s.Status.Description, outcome)
	}
	samples := r.samples(t)
	key := attribute.NewSet(attribute.String("type", typ), attribute.String("method", method), attribute.String("outcome", outcome))
	p, ok := samples[key.Equivalent()]
	if !ok || p.Count != 1 || len(samples) != 1 {
		t.Fatalf("samples %v, want one of %v", samples, key.ToSlice())
	}
	r.spans.Reset()
}

// TestACallRecordsOneSpanAndOneSample: each observed call records one
// span named store.<Type>.<Method> and one duration sample, both with the
// outcome class (not found, a refusal before any query, ok) and nothing
// of the call's arguments or error text.
func TestACallRecordsOneSpanAndOneSample(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()

	r := newRecorder()
	reader := storeobs.NewReader(st.Store.Reader(), r.obs)
	if _, err := reader.GetTurn(ctx, uuid.New()); err == nil {
		t.Fatal("GetTurn of an unknown id succeeded")
	}
	r.wantCall(t, "Reader", "GetTurn", "not_found")

	r = newRecorder()
	admin := storeobs.NewAdmin(st.Store.Admin(), r.obs)
	if _, err := admin.CommitGeneration(ctx, store.GenerationSeen{}, store.NewGeneration{}); err == nil {
		t.Fatal("a commit without a seen generation succeeded")
	}
	r.wantCall(t, "Admin", "CommitGeneration", "invalid")

	r = newRecorder()
	reader = storeobs.NewReader(st.Store.Reader(), r.obs)
	if _, err := reader.SeenGeneration(ctx); err != nil {
		t.Fatal(err)
	}
	r.wantCall(t, "Reader", "SeenGeneration", "ok")
}

// TestOutcomeIsTheClass: the outcome names the errdefs class through any
// wrapping, and nothing else.
func TestOutcomeIsTheClass(t *testing.T) {
	for err, want := range map[error]string{
		nil:                    "ok",
		store.ErrTurnProtocol:  "failed_precondition",
		store.ErrNoRuntimeConn: "invalid",
		context.Canceled:       "canceled",
		store.ErrNodesMoved:    "fenced",
		errUnclassified:        "unknown",
	} {
		if got := storeobs.Outcome(err); got != want {
			t.Errorf("Outcome(%v) = %q, want %q", err, got, want)
		}
	}
}

var errUnclassified = errors.New("a native error of no class")
