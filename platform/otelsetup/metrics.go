package otelsetup

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// MetricsPath is where the metrics server answers.
const MetricsPath = "/metrics"

// Bounds of the metrics server: a scrape is one small GET, so a client
// that takes longer to send its headers, or a scrape that takes longer to
// answer, is dropped, and only a few scrapes run at once (the observable
// gauges' callbacks read the database).
const (
	metricsReadHeaderTimeout = 5 * time.Second
	metricsScrapeTimeout     = 10 * time.Second
	metricsMaxInFlight       = 4
)

// Metrics is the process's metrics pipeline: the global MeterProvider and
// the Prometheus handler that reads it.
type Metrics struct {
	provider *sdkmetric.MeterProvider
	handler  http.Handler
}

// StartMetrics builds a MeterProvider named service at version whose
// instruments a Prometheus exporter reads at every scrape, installs it as
// the global MeterProvider (instruments made from otel.Meter, and otelgrpc's,
// record into it from then on) and returns it with its handler. OTel names
// become Prometheus names the usual way: dots become underscores, the unit
// is a suffix (berth.lifecycle.operation.duration in s is
// berth_lifecycle_operation_duration_seconds), counters end in _total. The
// registry is the handler's own, with the Go runtime and process
// collectors beside the exporter. Errors of the pipeline are logged on log.
func StartMetrics(ctx context.Context, service, version string, log *slog.Logger) (*Metrics, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("go collector: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("process collector: %w", err)
	}
	res, err := newResource(ctx, service, version)
	if err != nil {
		return nil, err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res))
	handleErrors(log)
	otel.SetMeterProvider(mp)
	return &Metrics{
		provider: mp,
		handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{
			ErrorHandling: promhttp.ContinueOnError, MaxRequestsInFlight: metricsMaxInFlight,
			Timeout: metricsScrapeTimeout,
		}),
	}, nil
}

// Handler serves the Prometheus text format.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Shutdown stops the MeterProvider (later recordings are dropped), within
// ctx's bound.
func (m *Metrics) Shutdown(ctx context.Context) error { return m.provider.Shutdown(ctx) }

// Server returns the HTTP server of the metrics endpoint: MetricsPath and
// nothing else, with bounded header reads and scrapes. The caller runs it
// (Serve) on its listener and stops it (Shutdown, then Close).
func (m *Metrics) Server() *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET "+MetricsPath, m.handler)
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: metricsReadHeaderTimeout,
		WriteTimeout:      metricsScrapeTimeout + time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    16 << 10,
	}
}

// handleErrors logs the OpenTelemetry pipeline's errors (a failed export,
// a callback that failed) on log instead of the standard logger.
func handleErrors(log *slog.Logger) {
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("telemetry", "error", err.Error())
	}))
}
