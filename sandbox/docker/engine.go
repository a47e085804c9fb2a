package docker

import (
	"bytes"
	"context"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// engineProcessName is the command name (/proc/<pid>/comm) of the Docker
// Engine's daemon. An engine identity is established only for a socket
// whose listener this process created: its death then ends every request
// the engine received (doc.go, "Retention").
const engineProcessName = "dockerd"

// unknownEngine is the engine identity of a tombstone placed while the
// identity could not be established: such a tombstone is never removed by
// the adapter.
const unknownEngine = "unknown"

// engineIdentity returns the identity ("<pid>:<start time>") of the
// process that listens on the client's Unix socket, read from the
// socket's peer credentials and /proc, or unknownEngine when it cannot be
// established: not a Unix socket (a fixture over TCP), a peer in another
// PID namespace (pid 0), a listener created by another process than the
// engine (systemd socket activation, pid 1, or a proxy), or anything
// unreadable. A listener another process created can outlive the engine
// and hand requests queued in its backlog to the next engine, so only the
// engine's own listener makes its exit a proof.
func (p *Provider) engineIdentity(ctx context.Context) string {
	path, ok := unixSocketPath(p.cli.DaemonHost())
	if !ok {
		return unknownEngine
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return unknownEngine
	}
	defer conn.Close()
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return unknownEngine
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return unknownEngine
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || credErr != nil || cred == nil || cred.Pid <= 1 {
		return unknownEngine
	}
	start, ok := processStart(int(cred.Pid))
	if !ok {
		return unknownEngine
	}
	return strconv.Itoa(int(cred.Pid)) + ":" + start
}

// engineGone reports whether the engine process identity names has
// exited, given current, the identity of the engine that listens on the
// socket now, established in the same pass. Without a current identity
// nothing is proved: the processes of /proc may be hidden from this one
// (hidepid, systemd's ProtectProc), and a hidden engine looks gone; once
// the current engine is visible, an earlier engine of the same socket
// would be too. An unknown or malformed identity is never gone.
func engineGone(identity, current string) bool {
	if current == unknownEngine || identity == unknownEngine || identity == current {
		return false
	}
	pidText, start, ok := strings.Cut(identity, ":")
	if !ok || start == "" {
		return false
	}
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 1 {
		return false
	}
	now, running := processStart(pid)
	return !running || now != start
}

// processStart returns the start time (field 22 of /proc/<pid>/stat, in
// clock ticks since boot) of the engine process pid; false when pid runs
// no engine or cannot be read.
func processStart(pid int) (string, bool) {
	dir := "/proc/" + strconv.Itoa(pid)
	comm, err := os.ReadFile(dir + "/comm")
	if err != nil || string(bytes.TrimSpace(comm)) != engineProcessName {
		return "", false
	}
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return "", false
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields after it start past the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return "", false
	}
	fields := strings.Fields(string(stat[i+1:]))
	// fields[0] is field 3 (state); the start time is field 22.
	if len(fields) < 20 {
		return "", false
	}
	return fields[19], true
}

// unixSocketPath returns the socket path of a "unix://" host.
func unixSocketPath(host string) (string, bool) {
	u, err := url.Parse(host)
	if err != nil || u.Scheme != "unix" {
		return "", false
	}
	path := u.Path
	if path == "" {
		path = u.Host
	}
	return path, path != ""
}
