// Package errdefs is Berth's one leaf package of error classes.
//
// Every layer classifies failures with these sentinels and checks them with
// errors.Is (or the Is* helpers), never by message text. Each server boundary
// converts a class to a fixed wire code once, and each client boundary
// converts it back once; nothing else crosses a boundary, so native error
// text, resource identities and credentials never leak.
//
// Rules:
//   - errdefs imports only the standard library and nothing in Berth, so
//     every other package can depend on it (depguard: errdefs-leaf).
//   - A refusal is errdefs.Refuse: a class, a fixed snake_case reason and a
//     message that tells the operator what to do and the bounds enforced.
//   - A new class is added here or nowhere; the codec (platform/errgrpc)
//     gives each its wire code.
package errdefs
