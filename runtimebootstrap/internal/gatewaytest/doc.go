// Package gatewaytest serves a test's fake of Core's Runtime gateway on
// loopback, so that the client's and the daemon's tests start it the same
// way: Serve for a hand-written gateway, Start (or StartTLS) for the
// scriptable Core, whose Conns the test drives message by message
// (welcome, keepalives, Turns, quiesce, open_transfer) and ends with a
// status of its choice, and whose Transfers (the Runtime's Transfer
// streams) it drives the same way.
//
// Rules:
//   - It is imported only by tests of runtimebootstrap (runtimeclient,
//     cmd/berth-runtime); internal, so nothing outside the module can.
//   - It speaks berth.runtime.v1 from package proto and nothing else of
//     Berth: the Runtime's tests never link Core.
//   - Every server stops at the test's cleanup; a Conn's messages are read
//     in the order the Runtime sent them (Next, Ended).
package gatewaytest
