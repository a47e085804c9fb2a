// Package enrollwire is berth.enrollment.v1's error table: the one codec
// both sides of an enrollment build, Core's enrollment server to encode
// its answer and the node agent to decode it.
//
// Rules:
//   - The table is written once, here. Each side passes its own class for
//     the token refusal (core/enrollment.ErrRejected on Core's side, the
//     node agent's own on the other), which must wrap errdefs.ErrFenced.
//   - The rows are the token refusal, then errgrpc's shared rows; an
//     error outside them crosses as "internal" with a fixed message.
//   - It imports platform/errgrpc, proto and sandbox/errdefs only.
package enrollwire
