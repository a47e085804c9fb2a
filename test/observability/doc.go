// Package observability holds the black-box tests of Berth's telemetry:
// real berth-core (with its Runtime gateway) and berth-nodeagent on the
// real Docker Engine and PostgreSQL, with their metrics endpoints scraped
// by a real Prometheus (Debian's prometheus package, which
// scripts/test-services installs) and their OTLP trace exports received by
// a collector the test serves (the OTLP TraceService over gRPC on
// loopback). The checks read Prometheus's query API and the exported
// spans, never Berth's own report. Without the prometheus binary the
// Prometheus half is skipped, and fails under CI=true.
package observability
