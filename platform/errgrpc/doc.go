// Package errgrpc is Berth's one codec between errdefs classes and gRPC
// statuses (containerd's errgrpc is the model).
//
// Every boundary (the admin API, the node protocol, the Runtime gateway,
// enrollment) builds one Codec from the shared precedence table (Common)
// plus only its own rows, and converts once: servers in an interceptor or
// at the return of their one stream, clients once when a call fails.
//
// Rules:
//   - Every status has a fixed message and one google.rpc.ErrorInfo whose
//     domain names the boundary and whose reason is a row's. err.Error()
//     never crosses: native text, resource identities and credentials stay
//     home.
//   - The only values that cross are authored: a field path of safe form
//     (errdefs.FieldError), a provider operation and its reason code
//     (providercontract.UnsupportedError), and, where a boundary allows
//     it, an errdefs.Refusal's reason and message, which tell the operator
//     what to do. Anything of another form is left off.
//   - An error of no known class crosses as the boundary's unknown row;
//     on the node protocol that is an unknown outcome, never permission to
//     retry a mutation.
//   - A body that does not decode is refused the same way: every server
//     installs a Decoder (its codec and interceptors), whose refusal is
//     the boundary's own status, so grpc-go's INTERNAL and the parser's
//     text never cross either.
//
// errgrpc imports only errdefs and providercontract of Berth.
package errgrpc
