package otelsetup_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"berth.dev/platform/otelsetup"
	"berth.dev/sandbox/errdefs"
)

func TestTracesWanted(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want bool
		bad  bool
	}{
		{name: "nothing set", env: nil, want: false},
		{name: "endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"}, want: true},
		{name: "traces endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4317"}, want: true},
		{name: "exporter otlp without endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, want: true},
		{name: "exporter none wins over an endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4317"}, want: false},
		{name: "none in a list", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp, none"}, want: false},
		{name: "sdk disabled", env: map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"}, want: false},
		{name: "sdk not disabled", env: map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4317"}, want: true},
		{name: "another exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, bad: true},
		{name: "http protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"}, bad: true},
		{name: "traces protocol grpc wins", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4317"}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := otelsetup.TracesWanted(func(k string) string { return tc.env[k] })
			if tc.bad {
				if !errors.Is(err, errdefs.ErrInvalid) {
					t.Fatalf("TracesWanted = %v, %v; want ErrInvalid", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("TracesWanted = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestTraces runs in order: first with the environment unset (nothing is
// installed, as at default settings), then with an endpoint (the global
// provider records and the propagator injects trace-context). The globals
// are the process's, so the order matters and the test is not parallel.
func TestTraces(t *testing.T) {
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		t.Setenv(k, "")
	}
	log := slog.New(slog.DiscardHandler)
	ctx := context.Background()

	shutdown, enabled, err := otelsetup.Traces(ctx, otelsetup.CoreService, "test", log)
	if err != nil || enabled {
		t.Fatalf("Traces with no OTEL_* set = %v, %v; want off", enabled, err)
	}
	if _, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); ok {
		t.Fatal("an SDK tracer provider was installed with no OTEL_* set")
	}
	sctx, span := otel.Tracer("test").Start(ctx, "op")
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Fatal("a span records with tracing off")
	}
	span.End()
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(sctx, carrier)
	if len(carrier) != 0 {
		t.Fatalf("tracing off injected %v", carrier)
	}
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	// On: an endpoint where nothing listens. The start does not wait for
	// it, and the shutdown gives up within its bound.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
	shutdown, enabled, err = otelsetup.Traces(ctx, otelsetup.NodeAgentService, "test", log)
	if err != nil || !enabled {
		t.Fatalf("Traces with an endpoint = %v, %v; want on", enabled, err)
	}
	if _, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); !ok {
		t.Fatalf("the global tracer provider is %T, want the SDK's", otel.GetTracerProvider())
	}
	sctx, span = otel.Tracer("test").Start(ctx, "op")
	if !span.IsRecording() || !span.SpanContext().IsValid() {
		t.Fatal("a span does not record with tracing on")
	}
	otel.GetTextMapPropagator().Inject(sctx, carrier)
	if want := span.SpanContext().TraceID().String(); !strings.Contains(carrier.Get("traceparent"), want) {
		t.Fatalf("traceparent %q does not carry trace %s", carrier.Get("traceparent"), want)
	}
	if carrier.Get("baggage") != "" || len(carrier) != 1 {
		t.Fatalf("propagated more than trace-context: %v", carrier)
	}
	span.End()
	sdctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	start := time.Now()
	_ = shutdown(sdctx) // the collector is unreachable: an error is expected
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("shutdown took %v past its 1 s bound", d)
	}
}

func TestMetricsServesPrometheusNames(t *testing.T) {
	ctx := context.Background()
	m, err := otelsetup.StartMetrics(ctx, otelsetup.CoreService, "test", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(ctx)
	meter := otel.Meter("berth.dev/platform/otelsetup/test")
	h, err := meter.Float64Histogram("berth.test.operation.duration", metric.WithUnit("s"))
	if err != nil {
		t.Fatal(err)
	}
	h.Record(ctx, 0.25, metric.WithAttributes(attribute.String("operation", "create"), attribute.String("outcome", "ok")))
	c, err := meter.Int64UpDownCounter("berth.test.connections", metric.WithUnit("{connection}"))
	if err != nil {
		t.Fatal(err)
	}
	c.Add(ctx, 2)
	c.Add(ctx, -1)

	srv := httptest.NewServer(m.Server().Handler)
	defer srv.Close()
	body := get(t, srv.URL+otelsetup.MetricsPath, http.StatusOK)
	for _, want := range []string{
		`berth_test_operation_duration_seconds_count{operation="create",otel_scope_name="berth.dev/platform/otelsetup/test"`,
		`berth_test_operation_duration_seconds_bucket{`,
		"\nberth_test_connections{",
		`target_info{`,
		`service_name="berth-core"`,
		"\ngo_goroutines ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	var gauge string
	for line := range strings.SplitSeq(body, "\n") {
		if strings.HasPrefix(line, "berth_test_connections{") {
			gauge = line
		}
	}
	if !strings.HasSuffix(gauge, "} 1") {
		t.Errorf("the up-down counter's line is %q, want the value 1", gauge)
	}
	get(t, srv.URL+"/", http.StatusNotFound)
	get(t, srv.URL+"/debug/pprof/", http.StatusNotFound)
}

func get(t *testing.T, url string, want int) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %d, want %d", url, resp.StatusCode, want)
	}
	return string(b)
}

func TestLogHandlerAddsTraceIDs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(otelsetup.LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "x")
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled,
	}))
	log.InfoContext(ctx, "inside")
	log.Info("outside")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", buf.String())
	}
	var in, out map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &in); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &out); err != nil {
		t.Fatal(err)
	}
	if in["trace_id"] != tid.String() || in["span_id"] != sid.String() || in["component"] != "x" {
		t.Errorf("record inside a span: %v", in)
	}
	if _, ok := out["trace_id"]; ok {
		t.Errorf("record without a span carries a trace id: %v", out)
	}
}
