// Package runtimebootstrap defines the Runtime bootstrap file: the bounded
// document a provider places in a sandbox so that berth-runtime can find and
// authenticate to Core.
//
// Rules: this package imports no Berth module (adapters, Core and the Runtime
// all import it). The credential is a Secret that never prints.
//
// The module's other packages are the Runtime itself: turnexec (runs one
// Turn; imports no Berth module either), runtimeclient (the connection to
// Core) and cmd/berth-runtime. runtimeclient and cmd/berth-runtime import
// berth.dev/proto for the generated berth.runtime.v1 API. That is the one
// exception to "runtimebootstrap imports no Berth module", and it makes no
// cycle because proto imports nothing from Berth; the root package, which
// sandbox and core import, stays free of Berth imports (and of gRPC).
//
// Planned suspension: the Runtime's parked state lies next to the
// bootstrap file (internal/park; for Path, /home/runtime/runtime-parked
// and /home/runtime/runtime-parked.pid). runtimeclient writes the park
// marker when it acknowledges a quiesce and removes it on every welcome;
// "berth-runtime connect" started with the marker present stays parked,
// without connecting, until "berth-runtime wake" signals it. The marker is
// in the home directory on purpose: the filesystem checkpoint captures it,
// so the restored sandbox starts parked. Both files are written atomically
// and fsynced, mode 0600; internal/park carries its own small atomic write
// because this module never imports sandbox (sandbox/atomicfile).
package runtimebootstrap
