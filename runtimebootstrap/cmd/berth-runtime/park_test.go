package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"berth.dev/runtimebootstrap/internal/gatewaytest"
	"berth.dev/runtimebootstrap/internal/park"
)

const parkedLine = `"msg":"parked for a planned suspension; waiting for berth-runtime wake"`

// runWake runs berth-runtime wake for the bootstrap file at path and
// returns its exit code, stdout and stderr.
func runWake(t *testing.T, path string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(binary(t), "wake", "--bootstrap-file", path)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return exitCode(t, cmd.Run()), stdout.String(), stderr.String()
}

// waitParked waits until d logged that it is parked.
func waitParked(t *testing.T, d *daemon) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(d.output(), parkedLine) {
		if time.Now().After(deadline) {
			t.Fatalf("not parked within 30s; output %q", d.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func absent(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s is present (%v)", filepath.Base(path), err)
	}
}

// TestQuiesceThenParkedStartUntilWake is the whole cycle through the
// binary: a quiesce leaves the marker, a restart with it stays parked
// without dialing Core until wake signals it, and then it connects.
func TestQuiesceThenParkedStartUntilWake(t *testing.T) {
	core, url := gatewaytest.Start(t)
	path := writeBootstrap(t, bootstrapJSON(url, testCredential), 0o600)
	dir := park.DirOf(path)

	d := startDaemonAt(t, path)
	c := accept(t, core, d)
	welcome(t, c, 1)
	c.Quiesce("6f1c2f5e-0000-4c5d-8e9f-0a1b2c3d4e5f")
	if ack, rejected := c.QuiesceReply(); ack.GetSuspensionToken() != "6f1c2f5e-0000-4c5d-8e9f-0a1b2c3d4e5f" {
		t.Fatalf("quiesce answered with %v %v", ack, rejected)
	}
	if data, err := os.ReadFile(dir.Marker()); err != nil || string(data) != "6f1c2f5e-0000-4c5d-8e9f-0a1b2c3d4e5f" {
		t.Fatalf("marker %q, %v", data, err)
	}
	// The filesystem is captured here; the sandbox stops.
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := d.wait(t); code != 0 {
		t.Fatalf("exit %d, want 0; output %q", code, d.output())
	}

	// The restored Runtime starts with the marker: parked.
	dials := core.Dials()
	d = startDaemonAt(t, path)
	waitParked(t, d)
	wf, err := os.ReadFile(dir.WakeFile())
	if err != nil || !strings.HasPrefix(string(wf), strconv.Itoa(d.cmd.Process.Pid)+" ") {
		t.Fatalf("wake file %q, %v; want pid %d", wf, err, d.cmd.Process.Pid)
	}
	if info, err := os.Stat(dir.WakeFile()); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("wake file mode %v, %v", info.Mode(), err)
	}
	time.Sleep(time.Second)
	if got := core.Dials(); got != dials {
		t.Fatalf("a parked runtime dialed core %d times", got-dials)
	}

	if code, stdout, stderr := runWake(t, path); code != 0 || stdout != "" || stderr != "" {
		t.Fatalf("wake: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	c = accept(t, core, d)
	if hello := welcome(t, c, 2); hello.GetCredential() != testCredential || hello.GetDeviceId() != testDevice {
		t.Fatalf("hello after wake: %v", hello)
	}
	absent(t, dir.Marker())
	absent(t, dir.WakeFile())
	if !strings.Contains(d.output(), `"msg":"woken from parking; connecting to core"`) {
		t.Fatalf("output %q", d.output())
	}
	// Woken, it is no longer parked; a stray SIGUSR1 does not harm it.
	if code, _, stderr := runWake(t, path); code != 4 || stderr != "berth-runtime: no parked runtime\n" {
		t.Fatalf("second wake: exit %d stderr %q", code, stderr)
	}
	if err := d.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	c.Keepalive(3)
	if strings.Contains(d.output(), testCredential) {
		t.Fatalf("output carries the credential: %q", d.output())
	}
}

func TestParkedStopsOnSignalAndStaysMarked(t *testing.T) {
	core, url := gatewaytest.Start(t)
	path := writeBootstrap(t, bootstrapJSON(url, testCredential), 0o600)
	dir := park.DirOf(path)
	if err := dir.WriteMarker("token-1"); err != nil {
		t.Fatal(err)
	}
	d := startDaemonAt(t, path)
	waitParked(t, d)
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := d.wait(t); code != 0 {
		t.Fatalf("exit %d, want 0; output %q", code, d.output())
	}
	if !strings.Contains(d.output(), `"msg":"stopping on signal"`) {
		t.Fatalf("output %q", d.output())
	}
	if core.Dials() != 0 {
		t.Fatalf("a parked runtime dialed core %d times", core.Dials())
	}
	// A restart parks again; nothing listens now.
	if data, err := os.ReadFile(dir.Marker()); err != nil || string(data) != "token-1" {
		t.Fatalf("marker %q, %v", data, err)
	}
	absent(t, dir.WakeFile())
	if code, _, stderr := runWake(t, path); code != 4 || stderr != "berth-runtime: no parked runtime\n" {
		t.Fatalf("wake: exit %d stderr %q", code, stderr)
	}
}

func TestWakeWithoutParkedRuntime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runtime-bootstrap.json")
	dir := park.DirOf(path)
	// Nothing at all; then a marker whose Runtime has not parked yet.
	for _, prepare := range []func() error{
		func() error { return nil },
		func() error { return dir.WriteMarker("token-1") },
	} {
		if err := prepare(); err != nil {
			t.Fatal(err)
		}
		if code, stdout, stderr := runWake(t, path); code != 4 || stdout != "" || stderr != "berth-runtime: no parked runtime\n" {
			t.Fatalf("exit %d stdout %q stderr %q", code, stdout, stderr)
		}
	}
}

// sleeper starts a sleep child, which SIGUSR1 would kill.
func sleeper(t *testing.T) (park.Process, chan error) {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	start, err := park.StartTime(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return park.Process{PID: cmd.Process.Pid, StartTime: start}, done
}

// parkedFor writes a marker and a wake file naming p.
func parkedFor(t *testing.T, p park.Process) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "runtime-bootstrap.json")
	dir := park.DirOf(path)
	if err := dir.WriteMarker("token-1"); err != nil {
		t.Fatal(err)
	}
	if err := dir.WriteWakeFile(p); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestWakeNeverSignalsAnotherStartTime(t *testing.T) {
	p, done := sleeper(t)
	p.StartTime++
	if code, stdout, stderr := runWake(t, parkedFor(t, p)); code != 5 || stdout != "" || stderr != "berth-runtime: parked runtime process is gone\n" {
		t.Fatalf("exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	select {
	case err := <-done:
		done <- err
		t.Fatalf("sleep %d ended: %v", p.PID, err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := syscall.Kill(p.PID, 0); err != nil {
		t.Fatalf("sleep %d: %v", p.PID, err)
	}
}

func TestWakeOfAnExitedProcess(t *testing.T) {
	p, done := sleeper(t)
	if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	done <- <-done // reaped; kept for the cleanup
	if code, _, stderr := runWake(t, parkedFor(t, p)); code != 5 || stderr != "berth-runtime: parked runtime process is gone\n" {
		t.Fatalf("exit %d stderr %q", code, stderr)
	}
}

func TestWakeSignalsTheRecordedProcess(t *testing.T) {
	p, done := sleeper(t)
	if code, stdout, stderr := runWake(t, parkedFor(t, p)); code != 0 || stdout != "" || stderr != "" {
		t.Fatalf("exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	select {
	case err := <-done:
		done <- err
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGUSR1 {
			t.Fatalf("sleep ended with %v, want SIGUSR1", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("sleep survived the wake")
	}
}

func TestWakeRefusesAnInvalidWakeFileWithoutPrintingIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runtime-bootstrap.json")
	dir := park.DirOf(path)
	if err := dir.WriteMarker("token-1"); err != nil {
		t.Fatal(err)
	}
	const content = "1 not-a-start-time-content\n"
	if err := os.WriteFile(dir.WakeFile(), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runWake(t, path)
	if code != 6 || stdout != "" || !strings.HasPrefix(stderr, "berth-runtime: wake: ") || strings.Contains(stderr, "not-a-start-time") {
		t.Fatalf("exit %d stdout %q stderr %q", code, stdout, stderr)
	}
}
