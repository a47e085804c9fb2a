package turnexec

import (
	"bytes"
	"os"
	"strconv"
	"sync"
	"syscall"
)

// children holds the pids of the Turn processes Run started and has not
// waited for yet. ReapOrphans never reaps one of them (exec.Cmd.Wait must
// get its status), and Run registers a pid under the same lock as it
// starts the process, so a pass cannot race a start.
var children = struct {
	sync.Mutex
	pids map[int]bool
}{pids: map[int]bool{}}

// ReapOrphans reaps the zombie children of this process that Run did not
// start, and returns how many it reaped.
//
// Why: berth-runtime is often PID 1 of its sandbox (the Docker adapter runs
// it without an init). Killing a Turn's process group orphans the
// grandchildren, which the kernel hands to PID 1; unless PID 1 waits for
// them they stay zombies and eat into the sandbox's pid limit. Call it on
// SIGCHLD and from time to time when the process is PID 1 or a subreaper.
// It reads /proc and returns 0 when /proc is unavailable.
func ReapOrphans() int {
	children.Lock()
	defer children.Unlock()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := os.Getpid()
	reaped := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || children.pids[pid] {
			continue
		}
		if !zombieChildOf(pid, self) {
			continue
		}
		var ws syscall.WaitStatus
		if got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); err == nil && got == pid {
			reaped++
		}
	}
	return reaped
}

// zombieChildOf reports whether /proc/pid/stat shows a zombie whose parent
// is parent. The command name may hold spaces and parentheses, so the
// fields are read after the last ')'.
func zombieChildOf(pid, parent int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return false
	}
	fields := bytes.Fields(stat[i+1:])
	if len(fields) < 2 || string(fields[0]) != "Z" {
		return false
	}
	ppid, err := strconv.Atoi(string(fields[1]))
	return err == nil && ppid == parent
}
