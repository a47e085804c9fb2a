// Package faultnet is a TCP path the black-box suites can break: a proxy
// between Core and a node agent that forwards until told to cut every
// connection (a reset the peers see at once) or to black-hole them (the
// connections stay open and every byte is dropped, as across a partition,
// so only keepalives can notice).
//
// Rules:
//   - It is a test fixture of the test module (test/chaos, test/bench);
//     the proxy closes at the test's cleanup.
//   - Cut refuses new connections too; BlackHole holds them open
//     unanswered. Restore lets bytes through again and closes the
//     connections that were black-holed (they lost bytes): their peers
//     reconnect. Accepted counts connections, so a test waits on that
//     evidence instead of sleeping.
//   - It imports only the standard library.
package faultnet
