// Package storeobs observes the store's views from the outside: Reader,
// Owner, Admin and Runtime here wrap the store's types of the same names
// with the same methods, and each call that takes a context gets one span
// and one sample of one duration histogram, after Coder's dbmetrics.
//
// Rules:
//   - zz_generated.go is written by core/store/internal/gendecorate (`go
//     generate` in core/store, `make generate`) and never edited;
//     `make verify-generated` fails when it is stale. This file's
//     siblings (observer.go) are the hand-written part.
//   - Telemetry goes around the interface, never inside queries: the
//     store itself has no tracer and no meter.
//   - Only the OpenTelemetry API is used (the daemon installs the SDK,
//     platform/otelsetup); without it every span and sample is a no-op.
//   - A span is named store.<Type>.<Method> and carries the method and
//     the outcome class only; the histogram berth.store.call.duration
//     carries type, method and outcome. Never an id, an argument or an
//     error's text: the outcome is the errdefs class (Outcome).
//   - Durations are measured on this process's monotonic clock: they
//     describe calls, they decide nothing.
package storeobs
