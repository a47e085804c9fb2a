// Package otelsetup is the one place where berth-core and berth-nodeagent
// set up OpenTelemetry: traces exported over OTLP, metrics served to
// Prometheus, and the trace ids on their log lines. Everything else only
// uses the OpenTelemetry API (otel.Tracer, otel.Meter, otelgrpc), which is a
// no-op until this package installs a provider.
//
// Rules:
//   - Traces are configured only by the standard OTEL_* environment
//     variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
//     OTEL_TRACES_EXPORTER, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
//     OTEL_TRACES_SAMPLER, OTEL_BSP_*, OTEL_EXPORTER_OTLP_INSECURE, ...), and
//     are off unless asked for: with no OTLP endpoint (and OTEL_TRACES_EXPORTER
//     not "otlp"), with OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true,
//     Traces installs nothing, so the global tracer stays the no-op one and
//     no trace context is propagated. Only the OTLP gRPC exporter is built in.
//   - Trace context crosses processes as W3C trace-context only (no
//     baggage): a caller's baggage never reaches a node agent's spans.
//   - Metrics exist only where an operator asked for a metrics listener:
//     Metrics installs the global MeterProvider, read by a Prometheus
//     handler on a registry of its own (never the process-wide default).
//   - Nothing here reads or records a secret: the resource is the service's
//     name and version, the host name and what OTEL_RESOURCE_ATTRIBUTES
//     says; never the command line or the environment at large.
//   - Shutdown flushes within the caller's bound (ShutdownTimeout in the
//     binaries): telemetry never holds a stopping process.
package otelsetup
