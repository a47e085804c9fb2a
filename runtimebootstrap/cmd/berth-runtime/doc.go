// Command berth-runtime is the Runtime daemon that runs inside each sandbox.
//
// "berth-runtime connect" reads and validates the bootstrap file, then holds
// a berth.runtime.v1 connection to Core's runtime gateway (runtimeclient):
// it authenticates with the file's device id and credential, runs the Turns
// Core delivers under /workspace, and reconnects with backoff whenever the
// connection ends. Logs are JSON lines on stderr (log/slog) and never carry
// the credential. As PID 1 (the Docker adapter runs it without an init) it
// also reaps the orphans of killed Turns.
//
// When a quiesce acknowledged for a planned suspension left the park
// marker next to the bootstrap file (see runtimebootstrap/internal/park),
// the filesystem Core captures holds it, and "berth-runtime connect" in
// the restored sandbox starts parked: it does not connect to Core. It
// listens for SIGUSR1, then writes the wake file (its PID and start time)
// next to the marker, logs "parked for a planned suspension; waiting for
// berth-runtime wake" and waits. SIGUSR1 removes the wake file and the
// marker, and it connects as usual (hello authenticates it as always);
// SIGTERM or SIGINT ends it with 0 and leaves the marker.
//
// "berth-runtime wake" is how Core ends the parking: run inside the
// sandbox as the Runtime user, it reads the wake file and sends SIGUSR1 to
// the recorded process only if that PID still has the recorded start time.
// On stderr it writes only the fixed lines of codes 4 and 5 or the failed
// step of code 6, never the files' content.
//
// Exit codes:
//
//	0  connect: stopped by SIGTERM or SIGINT; wake: the parked Runtime was
//	   signalled
//	1  connect: the bootstrap file is missing, unreadable, too open or
//	   invalid
//	2  usage error
//	3  connect: Core stopped this Runtime for good (credential rejected,
//	   revoked or protocol mismatch); restarting it cannot help
//	4  wake: "no parked runtime" (no park marker or no wake file: not
//	   parked, not parked yet, or already woken)
//	5  wake: "parked runtime process is gone" (the recorded PID is gone
//	   or now has another start time); nothing was signalled
//	6  connect: the park marker or wake file could not be read, written or
//	   removed; wake: the wake file is unreadable or invalid, or the
//	   signal could not be sent
package main
