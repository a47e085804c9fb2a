package park

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"berth.dev/runtimebootstrap"
)

// The files' names inside Dir: the root package's, which adapters read
// (runtimebootstrap.SourceStateFiles).
const (
	MarkerName   = runtimebootstrap.ParkMarkerName
	WakeFileName = runtimebootstrap.WakeFileName
)

// fileMode is the mode of both files.
const fileMode = 0o600

// maxWakeFileBytes bounds a wake file read: two decimal numbers.
const maxWakeFileBytes = 64

var (
	// ErrNotParked: no Runtime is parked here (no marker or no wake file).
	ErrNotParked = errors.New("no parked runtime")
	// ErrGone: the wake file names a process that no longer exists, or
	// whose PID now belongs to another process.
	ErrGone = errors.New("parked runtime process is gone")
	// ErrInvalidWakeFile: the wake file is not one Write wrote.
	ErrInvalidWakeFile = errors.New("wake file is invalid")
)

// Dir is the directory that holds a Runtime's parked state: its bootstrap
// file's directory.
type Dir string

// DirOf returns the Dir of the bootstrap file at bootstrapPath.
func DirOf(bootstrapPath string) Dir { return Dir(filepath.Dir(bootstrapPath)) }

// Marker is the park marker's path.
func (d Dir) Marker() string { return filepath.Join(string(d), MarkerName) }

// WakeFile is the wake file's path.
func (d Dir) WakeFile() string { return filepath.Join(string(d), WakeFileName) }

// WriteMarker writes the park marker holding token, durably.
func (d Dir) WriteMarker(token string) error {
	if err := writeFile(d.Marker(), []byte(token), fileMode); err != nil {
		return fmt.Errorf("write park marker: %w", err)
	}
	return nil
}

// RemoveMarker removes the park marker durably and reports whether there
// was one; an absent marker is not an error.
func (d Dir) RemoveMarker() (removed bool, err error) {
	removed, err = removeFile(d.Marker())
	if err != nil {
		return false, fmt.Errorf("remove park marker: %w", err)
	}
	return removed, nil
}

// Parked reports whether the park marker exists.
func (d Dir) Parked() (bool, error) {
	_, err := os.Lstat(d.Marker())
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("stat park marker: %w", err)
	}
}

// Process identifies one process: its PID and its start time.
type Process struct {
	PID       int
	StartTime uint64
}

// Self returns the calling process.
func Self() (Process, error) {
	pid := os.Getpid()
	start, err := StartTime(pid)
	if err != nil {
		return Process{}, err
	}
	return Process{PID: pid, StartTime: start}, nil
}

// WriteWakeFile records p as the parked Runtime, durably. Call it only once
// p listens for SIGUSR1.
func (d Dir) WriteWakeFile(p Process) error {
	data := strconv.Itoa(p.PID) + " " + strconv.FormatUint(p.StartTime, 10) + "\n"
	if err := writeFile(d.WakeFile(), []byte(data), fileMode); err != nil {
		return fmt.Errorf("write wake file: %w", err)
	}
	return nil
}

// RemoveWakeFile removes the wake file durably; an absent file is not an
// error.
func (d Dir) RemoveWakeFile() error {
	if _, err := removeFile(d.WakeFile()); err != nil {
		return fmt.Errorf("remove wake file: %w", err)
	}
	return nil
}

// ReadWakeFile returns the process the wake file records. It is
// ErrNotParked when the marker or the wake file is absent.
func (d Dir) ReadWakeFile() (Process, error) {
	parked, err := d.Parked()
	if err != nil {
		return Process{}, err
	}
	if !parked {
		return Process{}, ErrNotParked
	}
	f, err := os.Open(d.WakeFile())
	if errors.Is(err, fs.ErrNotExist) {
		return Process{}, ErrNotParked
	}
	if err != nil {
		return Process{}, fmt.Errorf("open wake file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxWakeFileBytes+1))
	if err != nil {
		return Process{}, fmt.Errorf("read wake file: %w", err)
	}
	p, ok := parseWakeFile(data)
	if !ok {
		return Process{}, ErrInvalidWakeFile
	}
	return p, nil
}

// parseWakeFile accepts exactly "<pid> <start time>\n" in canonical
// decimal.
func parseWakeFile(data []byte) (Process, bool) {
	if len(data) > maxWakeFileBytes {
		return Process{}, false
	}
	line, ok := bytes.CutSuffix(data, []byte("\n"))
	if !ok {
		return Process{}, false
	}
	pidText, startText, ok := bytes.Cut(line, []byte(" "))
	if !ok {
		return Process{}, false
	}
	pid, err := strconv.Atoi(string(pidText))
	if err != nil || pid <= 0 || strconv.Itoa(pid) != string(pidText) {
		return Process{}, false
	}
	start, err := strconv.ParseUint(string(startText), 10, 64)
	if err != nil || strconv.FormatUint(start, 10) != string(startText) {
		return Process{}, false
	}
	return Process{PID: pid, StartTime: start}, true
}

// Wake sends SIGUSR1 to the parked Runtime the wake file records. It is
// ErrNotParked without a marker or wake file, and ErrGone when the
// recorded process no longer exists or its PID has another start time; in
// both cases nothing is signalled.
func (d Dir) Wake() error {
	p, err := d.ReadWakeFile()
	if err != nil {
		return err
	}
	return Signal(p, syscall.SIGUSR1)
}

// Signal sends sig to p if p still runs. The process handle is taken
// before the start time is checked: on Linux it is a pidfd, which cannot
// follow the PID to another process, so a match proves the handle is p's.
// Without pidfd support a PID reused in the instant between the check and
// the signal cannot be excluded.
func Signal(p Process, sig syscall.Signal) error {
	proc, err := os.FindProcess(p.PID)
	if err != nil {
		return ErrGone
	}
	defer proc.Release()
	start, err := StartTime(p.PID)
	if errors.Is(err, ErrGone) || (err == nil && start != p.StartTime) {
		return ErrGone
	}
	if err != nil {
		return err
	}
	switch err := proc.Signal(sig); {
	case errors.Is(err, os.ErrProcessDone):
		return ErrGone
	case err != nil:
		return fmt.Errorf("signal: %w", err)
	}
	return nil
}
