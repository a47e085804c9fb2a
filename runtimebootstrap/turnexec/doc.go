// Package turnexec runs one Turn as a child process of berth-runtime and
// reports its output and how it ended.
//
// A Turn runs in its own process group so that a timeout or a cancellation
// kills everything it started (SIGKILL to the group), and in a fixed minimal
// environment (PATH, HOME and the Turn's own additions) so that nothing of
// the daemon's environment, which may carry secrets, reaches it. Output is
// delivered in chunks of at most MaxChunkBytes, in order and without gaps
// per stream, while the process runs; bytes beyond the per-stream bound are
// counted and dropped.
//
// Rules: this package imports no Berth module and never panics on input;
// everything wrong with a Turn becomes a Result with a fixed failure code.
// Results and errors never carry env values, stdin or output.
package turnexec
