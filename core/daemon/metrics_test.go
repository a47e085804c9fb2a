package daemon

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestMetricsEndpoint: with MetricsListen, Core serves /metrics with the
// gauges of its state (zero counts included, so the series exist before
// the first Session), the pool's, and its stop closes the endpoint;
// without it Core opens no metrics listener.
func TestMetricsEndpoint(t *testing.T) {
	cfg := testConfig(t)
	ctx, cancel := context.WithCancel(t.Context())
	s := start(t, ctx, cfg)
	if s.ready.MetricsAddr != "" {
		t.Fatalf("metrics served without MetricsListen: %+v", s.ready)
	}
	cancel()
	if err := s.wait(t); err != nil {
		t.Fatal(err)
	}

	cfg = testConfig(t)
	cfg.MetricsListen = "127.0.0.1:0"
	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	s = start(t, ctx, cfg)
	if s.ready.MetricsAddr == "" {
		t.Fatalf("ready: %+v", s.ready)
	}
	resp, err := http.Get("http://" + s.ready.MetricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	text := string(body)
	for _, want := range []string{
		`berth_sessions{otel_scope_name="berth.dev/core/daemon",otel_scope_schema_url="",otel_scope_version="",state="active"} 0`,
		`berth_sessions{otel_scope_name="berth.dev/core/daemon",otel_scope_schema_url="",otel_scope_version="",state="provisioning"} 0`,
		`berth_allocations{otel_scope_name="berth.dev/core/daemon",otel_scope_schema_url="",otel_scope_version="",state="running"} 0`,
		`berth_db_pool_connections{otel_scope_name="berth.dev/core/daemon",otel_scope_schema_url="",otel_scope_version="",state="idle"}`,
		`berth_db_pool_connections_max{`,
		`berth_db_pool_acquires_total{`,
		`berth_db_pool_acquire_waits_total{`,
		`berth_db_pool_acquire_duration_seconds_total{`,
		`service_name="berth-core"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", text)
	}
	if strings.Contains(text, cfg.DatabaseURL) || strings.Contains(text, "postgres:") {
		t.Error("/metrics shows the database URL")
	}
	cancel()
	if err := s.wait(t); err != nil {
		t.Fatal(err)
	}
	stopped(t, cfg, s.ready.MetricsAddr)
}
