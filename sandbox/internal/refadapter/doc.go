// Package refadapter is a small reference adapter over the refnative
// service. It exists only to prove the shared contract suite and the
// registration rules with a real adapter at a real HTTP boundary.
//
// Rules:
//   - It is never registered in providers/registry.go; tests build their
//     own registries with its Registration.
//   - It implements every interface an adapter must (SandboxProvider,
//     CheckpointProvider, the observation sources, discovery, credential
//     verification) and declares each operation, like a production
//     adapter: a change to the contract that it does not follow fails the
//     shared suite here first.
//   - Its errors are errdefs classes; native error text from refnative
//     never passes through.
//   - Internal to sandbox: only sandbox's own packages and tests import it.
package refadapter
