// Package dockertest is a fake Docker Engine for fault injection: an
// httptest server that speaks the subset of the Docker Engine HTTP API the
// Berth Docker adapter uses, as the github.com/moby/moby/client module
// (v0.6.2) sends it. It keeps a small stateful model (containers, volumes,
// images, copied archives, execs), records every call it receives under a
// stable name and injects one-shot native-side faults per call name.
//
// It exists so that the shared contract suite (berth.dev/sandbox/contracttest)
// can drive the real adapter, through the real Docker client, into transport
// drops, engine errors and cancellations that a real engine cannot produce
// on demand. It is a test fixture only. It NEVER replaces acceptance testing
// against a real Docker Engine: it models no images, filesystems, processes,
// cgroups, networks or storage drivers, its exec runs a tiny built-in command
// set, and where it answers like a real engine it does so only for the
// endpoints and cases listed below. Behaviour that passes here must still be
// proved against a real engine.
//
// Rules:
//   - It is a test fixture: imported by tests (the Docker adapter's, the
//     node agent's, Core's lifecycle worker's, the black-box suites') and
//     the black-box harness (test/internal/stack), never by a production
//     package.
//   - It answers only the endpoints it models, like a real engine where it
//     answers at all; anything else is recorded as "unknown METHOD PATH"
//     and answered 404, so an adapter that strays fails its test.
//   - Engine behaviour that adapters get wrong (an existing volume name
//     answered unchanged, volumes created unlabelled by a mount, a running
//     container not removed without force) is reproduced on purpose.
//   - A fault is armed per call name and fires once; every call is
//     recorded under a stable name, so a test asserts what reached the
//     engine.
//
// The modelled API, the exec's built-in commands and the faults are listed
// in docs/dockertest.md.
package dockertest
