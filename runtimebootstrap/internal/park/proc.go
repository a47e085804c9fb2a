package park

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"
)

// startTimeField is the 1-based field of /proc/<pid>/stat holding the
// process's start time; field 3 is its state.
const startTimeField = 22

// StartTime returns pid's start time: field 22 of /proc/<pid>/stat, in
// clock ticks since boot. It is ErrGone when the process does not exist or
// has exited (a zombie, or dead).
func StartTime(pid int) (uint64, error) {
	// Reading the stat of a process that exited after the open is ESRCH.
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH):
		return 0, ErrGone
	case err != nil:
		return 0, fmt.Errorf("read process stat: %w", err)
	}
	state, start, ok := parseStat(data)
	if !ok {
		return 0, errors.New("read process stat: unexpected format")
	}
	if state == 'Z' || state == 'X' {
		return 0, ErrGone
	}
	return start, nil
}

// parseStat reads the state (field 3) and the start time (field 22) of a
// /proc/<pid>/stat line. Field 2, the command name, is in parentheses and
// may itself hold spaces and parentheses, so fields are counted from the
// last ')'.
func parseStat(stat []byte) (state byte, start uint64, ok bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, false
	}
	// After ")" come fields 3, 4, ...
	fields := bytes.Fields(stat[i+1:])
	if len(fields) < startTimeField-2 || len(fields[0]) != 1 {
		return 0, 0, false
	}
	start, err := strconv.ParseUint(string(fields[startTimeField-3]), 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return fields[0][0], start, true
}
