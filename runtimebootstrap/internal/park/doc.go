// Package park keeps a Runtime's parked state on disk, next to its
// bootstrap file (Dir): the park marker and the wake file.
//
// The park marker (MarkerName) holds the suspension token of the quiesce
// that wrote it. The filesystem checkpoint of a planned suspension
// captures it, so a Runtime restored from that filesystem starts parked:
// it does not connect to Core until "berth-runtime wake" signals it. The
// connection's next welcome removes it.
//
// The wake file (WakeFileName) is written by a parked Runtime once it
// listens for SIGUSR1: its PID and its start time (field 22 of
// /proc/<pid>/stat, in clock ticks since boot). Wake signals only the
// process whose PID still has that start time, through a pidfd where the
// kernel has one, so a PID reused by another process is never signalled.
//
// Rules: both files are written atomically (temporary file, fsync,
// rename, fsync of the directory) with mode 0600, and removed durably
// (fsync of the directory). The atomic write is a small copy of
// sandbox/atomicfile's: runtimebootstrap never imports sandbox (DESIGN.md,
// enforced by depguard). Errors name the step, never the files' content.
package park
