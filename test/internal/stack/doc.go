// Package stack starts and drives Berth's real processes for black-box
// tests: it builds berth-core and berth-nodeagent once per test binary
// (Main), runs berth-core with its log captured and its `serving` line
// parsed (Core), writes, enrolls, starts, kills and stops berth-nodeagent
// processes (Node), dials the admin API with the operator's token, commits a
// Docker deployment, waits for nodes, and counts what the Docker Engine
// holds under an installation's labels.
//
// Rules: every helper takes a testing.TB and fails the test on error;
// nothing here asserts behaviour of Berth (tests do); secrets (admin token,
// enrollment tokens, database URL) travel in files or the environment,
// never in argv or a log line.
package stack
