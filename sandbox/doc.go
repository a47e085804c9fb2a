// Package sandbox is the Sandbox Provider contract: the identity, value
// types and interfaces that every adapter implements and that Core and the
// node agent program against. The behaviour is the Sandbox Provider guide's
// (shared/spec/sandbox-provider-guide.txt); read it before changing this
// package.
//
// Rules:
//   - Core owns durable state; a provider owns compute and bootstrap only.
//   - A Reference is the exact (tenant, environment, allocation) tuple. No
//     adapter locates or authorizes a resource by anything less.
//   - Callers decide support from ProviderOperations(), never by type
//     assertion. ValidateOperations derives the method inventory from the
//     interfaces in this package by reflection; there is no second list.
//   - All observation interfaces live here (runtimeobs re-exports them) so
//     that the inventory sees every contract without an import cycle.
//   - An adapter without checkpoints embeds CheckpointsUnsupported over its
//     declaration instead of writing the nine refusals again.
//   - Error classes come from errdefs; nothing here matches error text.
//   - A provider credential travels only as a Credential, which no printer
//     shows (sandbox/redacttest checks it); adapters Reveal it to parse
//     it, Core to seal it.
//   - This module is what an adapter author imports, so it stays lean: no
//     gRPC, no node protocol, no telemetry SDK. The shared platform pieces
//     (errgrpc, nodewire, nodetls, otelsetup) are the berth.dev/platform
//     module, which imports this one and never the reverse (depguard:
//     sandbox-lean, platform-no-upper-layers).
package sandbox
