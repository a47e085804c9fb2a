package admin

// The admin server's bounds on what a caller may send. They hold before
// authentication as well as after: the header block is read before the
// token can be checked, and everything else only after (auth.go, tap).
const (
	// MaxHeaderListBytes bounds a call's header block (HTTP/2
	// SETTINGS_MAX_HEADER_LIST_SIZE), the only thing an unauthenticated
	// caller gets Core to read. A legitimate call's headers are well under
	// 1 KiB: the bearer token (about 65 bytes), grpc-go's own headers
	// (path, content type, user agent, timeout) and a trace context.
	// 16 KiB leaves room for proxies' and tracing's additions while keeping
	// a hostile caller's cost per stream small (grpc-go's default is
	// 16 MiB, so twenty 15 MB headers took Core past a gigabyte).
	MaxHeaderListBytes = 16 << 10

	// MaxRecvMsgBytes bounds one request message. The largest legitimate
	// ones are a SubmitTurn with its full stdin (turns.MaxStdinBytes,
	// 1 MiB), a script of up to 256 KiB, arguments and environment; a
	// deployment candidate is at most two 64 KiB JSON objects and a
	// specification. 4 MiB is grpc-go's own default, so no call that
	// worked before is refused now; what it bounds is an authenticated
	// caller's message, since an unauthenticated one is refused before its
	// body is read.
	MaxRecvMsgBytes = 4 << 20

	// MaxMessageDepth bounds protobuf message nesting while a request is
	// decoded (protobuf-go's default is 10,000). A google.protobuf.Struct
	// object costs three levels (Struct, map entry, Value) and a list two,
	// so 128 levels decode every candidate that MaxStructDepth accepts,
	// while a body nested past it is refused as malformed before its
	// Structs are built.
	MaxMessageDepth = 128

	// MaxStructDepth bounds the nesting of a google.protobuf.Struct value
	// in a request (ValidateStruct): objects and lists inside objects, the
	// outermost object at depth 1. A provider's configuration is a few
	// levels deep; 32 is far past any real one and keeps the JSON made
	// from it (and every walk over it) shallow.
	MaxStructDepth = 32
)
