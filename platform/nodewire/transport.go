package nodewire

import (
	"time"

	"berth.dev/sandbox"
)

// The node protocol's transport parameters, the same on both sides.
const (
	// MaxMessageBytes bounds one message: a command result of two full
	// output streams and room for the rest.
	MaxMessageBytes = 2*sandbox.MaxOutputLimit + 8<<20

	// MaxHeaderListBytes bounds a call's header block on the node agent's
	// server (grpc-go's default is 16 MiB). Core's calls carry the protocol
	// version, connection id, owner epoch, generation and a trace context,
	// a few hundred bytes; 16 KiB bounds what a peer can make the node
	// buffer per stream. The TLS handshake already demands the
	// installation's client certificate, so only a holder of one gets this
	// far.
	MaxHeaderListBytes = 16 << 10

	// KeepaliveTime is how long Core's connection to a node may go without
	// a frame before Core pings it (grpc-go's floor for a client is ten
	// seconds). The Connect stream's health reports (every ten seconds by
	// default) count as frames.
	KeepaliveTime = 10 * time.Second
	// KeepaliveTimeout is how long Core waits for the ping's answer before
	// it closes the connection: a stopped (SIGSTOP) or cut-off node agent
	// is then noticed within KeepaliveTime+KeepaliveTimeout of its last
	// frame, the connection's presence is recorded disconnected and
	// placement stops choosing the node at once, instead of when its last
	// health report ages past the 45-second presence window. Three
	// seconds keeps that under the 15-second detection goal (issue 13,
	// P6; five seconds measured 15.0 s) while a live agent, whose
	// transport answers pings without its handlers, has a hundred times
	// a loaded host's round trip to answer.
	KeepaliveTimeout = 3 * time.Second
	// KeepaliveMinTime is the shortest ping interval a node agent accepts
	// (below it, it would close the connection as abusive): half of
	// KeepaliveTime, for slack.
	KeepaliveMinTime = KeepaliveTime / 2
)
