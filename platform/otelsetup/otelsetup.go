package otelsetup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"berth.dev/sandbox/errdefs"
)

// The service names the binaries report (OTEL_SERVICE_NAME overrides).
const (
	CoreService      = "berth-core"
	NodeAgentService = "berth-nodeagent"
)

// ShutdownTimeout bounds the flush of what is still buffered when a binary
// stops: spans not exported by then are dropped, the process does not wait.
const ShutdownTimeout = 5 * time.Second

// The environment variables Traces decides on (the OpenTelemetry SDK
// specification's names; the exporter and the SDK read the rest).
const (
	envSDKDisabled    = "OTEL_SDK_DISABLED"
	envTracesExporter = "OTEL_TRACES_EXPORTER"
	envEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
)

// TracesWanted reports whether the environment (getenv) asks for traces:
// OTEL_TRACES_EXPORTER is "otlp", or it is unset and an OTLP endpoint is
// configured; never when OTEL_SDK_DISABLED is true or the exporter is
// "none". An exporter or protocol other than OTLP over gRPC is refused
// (errdefs.ErrInvalid), not silently ignored.
func TracesWanted(getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv(envSDKDisabled)), "true") {
		return false, nil
	}
	for _, key := range []string{envTracesProtocol, envProtocol} {
		if p := strings.TrimSpace(getenv(key)); p != "" {
			if p != "grpc" {
				return false, errdefs.Invalid(key, "only grpc is supported (the OTLP gRPC exporter)")
			}
			break // the traces-specific setting wins
		}
	}
	otlp, none, named := false, false, false
	for e := range strings.SplitSeq(getenv(envTracesExporter), ",") {
		switch e = strings.TrimSpace(e); e {
		case "":
		case "otlp":
			otlp, named = true, true
		case "none":
			none, named = true, true
		default:
			return false, errdefs.Invalid(envTracesExporter, "only otlp or none is supported")
		}
	}
	switch {
	case none:
		return false, nil
	case named:
		return otlp, nil
	}
	return getenv(envEndpoint) != "" || getenv(envTracesEndpoint) != "", nil
}

// Traces installs the process's tracing when the environment asks for it
// (TracesWanted): a TracerProvider named service at version whose spans a
// batch processor exports over OTLP gRPC, as the global TracerProvider,
// and W3C trace-context as the global propagator. The exporter and the
// SDK read their settings (endpoint, TLS, headers, timeouts, sampler,
// batching) from the OTEL_* variables themselves. Export failures are
// logged on log. Otherwise it installs nothing: enabled is false, and
// shutdown does nothing. The exporter dials lazily, so an unreachable
// collector never stops a start.
//
// shutdown flushes and stops the provider, within its context's bound.
func Traces(ctx context.Context, service, version string, log *slog.Logger) (shutdown func(context.Context) error, enabled bool, err error) {
	noop := func(context.Context) error { return nil }
	wanted, err := TracesWanted(os.Getenv)
	if err != nil || !wanted {
		return noop, false, err
	}
	exp, err := otlptracegrpc.New(ctx)
	if err != nil {
		return noop, false, fmt.Errorf("otlp trace exporter: %w", err)
	}
	res, err := newResource(ctx, service, version)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return noop, false, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	handleErrors(log)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	return tp.Shutdown, true, nil
}

// newResource describes the process: the service's name and version, the
// host, the SDK, then OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (which
// win). A detector that found only part of what it looks for is no
// failure.
func newResource(ctx context.Context, service, version string) (*resource.Resource, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service), attribute.String("service.version", version)),
		resource.WithHost(),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	return res, nil
}
