package park

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestMarkerWrittenDurablyAndRemoved(t *testing.T) {
	d := Dir(t.TempDir())
	if parked, err := d.Parked(); err != nil || parked {
		t.Fatalf("fresh dir: parked %v, %v", parked, err)
	}
	for _, token := range []string{"first-token", "second"} {
		if err := d.WriteMarker(token); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(d.Marker())
		if err != nil || string(data) != token {
			t.Fatalf("marker %q, %v; want %q", data, err, token)
		}
	}
	info, err := os.Stat(d.Marker())
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("marker mode %v, %v", info.Mode(), err)
	}
	if parked, err := d.Parked(); err != nil || !parked {
		t.Fatalf("after write: parked %v, %v", parked, err)
	}
	for _, want := range []bool{true, false} {
		if removed, err := d.RemoveMarker(); err != nil || removed != want {
			t.Fatalf("remove: %v, %v; want %v", removed, err, want)
		}
	}
	if parked, err := d.Parked(); err != nil || parked {
		t.Fatalf("after remove: parked %v, %v", parked, err)
	}
	if entries, _ := os.ReadDir(string(d)); len(entries) != 0 {
		t.Fatalf("left %d files behind", len(entries))
	}
}

func TestDirOfIsTheBootstrapFilesDirectory(t *testing.T) {
	d := DirOf("/home/runtime/runtime-bootstrap.json")
	if d.Marker() != "/home/runtime/runtime-parked" || d.WakeFile() != "/home/runtime/runtime-parked.pid" {
		t.Fatalf("marker %q wake file %q", d.Marker(), d.WakeFile())
	}
}

func TestWakeFileRoundTrip(t *testing.T) {
	d := Dir(t.TempDir())
	if err := d.WriteMarker("t"); err != nil {
		t.Fatal(err)
	}
	want := Process{PID: 4711, StartTime: 123456789}
	if err := d.WriteWakeFile(want); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(d.WakeFile())
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("wake file mode %v, %v", info.Mode(), err)
	}
	got, err := d.ReadWakeFile()
	if err != nil || got != want {
		t.Fatalf("read %v, %v; want %v", got, err, want)
	}
	if err := d.RemoveWakeFile(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadWakeFile(); !errors.Is(err, ErrNotParked) {
		t.Fatalf("without a wake file: %v, want ErrNotParked", err)
	}
}

func TestReadWakeFileRefusesOtherContent(t *testing.T) {
	for _, content := range []string{
		"", "12", "12 34", "12  34\n", "12 34\n\n", "012 34\n", "12 034\n", "-1 34\n", "0 34\n",
		"12 -34\n", "12 34 56\n", "x 34\n", "12 99999999999999999999999\n", "1 " + string(make([]byte, 70)) + "\n",
	} {
		d := Dir(t.TempDir())
		if err := d.WriteMarker("t"); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(d.WakeFile(), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if p, err := d.ReadWakeFile(); !errors.Is(err, ErrInvalidWakeFile) {
			t.Errorf("%q: %v, %v; want ErrInvalidWakeFile", content, p, err)
		}
	}
}

func TestParseStat(t *testing.T) {
	// The command name may hold spaces and parentheses.
	line := "4711 (a) b (c) R 1 4711 4711 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 10 18446744073709551615\n"
	state, start, ok := parseStat([]byte(line))
	if !ok || state != 'R' || start != 98765 {
		t.Fatalf("state %c start %d ok %v", state, start, ok)
	}
	for _, bad := range []string{"", "4711 (a) R 1 2 3", "4711 a R 1 4711 4711 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 x 1"} {
		if _, _, ok := parseStat([]byte(bad)); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestSelfStartTime(t *testing.T) {
	a, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Self()
	if err != nil || a != b || a.PID != os.Getpid() || a.StartTime == 0 {
		t.Fatalf("self %v then %v, %v", a, b, err)
	}
}

// sleeper starts a sleep child that SIGUSR1 kills (its default action).
func sleeper(t *testing.T) (*exec.Cmd, Process, chan error) {
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
	start, err := StartTime(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return cmd, Process{PID: cmd.Process.Pid, StartTime: start}, done
}

func parkedAt(t *testing.T, p Process) Dir {
	t.Helper()
	d := Dir(t.TempDir())
	if err := d.WriteMarker("t"); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteWakeFile(p); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestWakeSignalsTheRecordedProcess(t *testing.T) {
	_, p, done := sleeper(t)
	if err := parkedAt(t, p).Wake(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGUSR1 {
			t.Fatalf("sleep ended with %v, want SIGUSR1", err)
		}
		done <- err // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("sleep survived the wake")
	}
}

func TestWakeNeverSignalsAnotherStartTime(t *testing.T) {
	cmd, p, done := sleeper(t)
	p.StartTime++
	if err := parkedAt(t, p).Wake(); !errors.Is(err, ErrGone) {
		t.Fatalf("wake: %v, want ErrGone", err)
	}
	select {
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("sleep %d ended: %v", cmd.Process.Pid, err)
	case <-time.After(300 * time.Millisecond):
	}
}

func TestWakeOfAnExitedProcessIsGone(t *testing.T) {
	_, p, done := sleeper(t)
	d := parkedAt(t, p)
	if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	done <- <-done // reaped; kept for the cleanup
	if err := d.Wake(); !errors.Is(err, ErrGone) {
		t.Fatalf("wake: %v, want ErrGone", err)
	}
}

func TestWakeWithoutParkedRuntime(t *testing.T) {
	_, p, _ := sleeper(t)
	// No marker, no wake file.
	d := Dir(t.TempDir())
	if err := d.Wake(); !errors.Is(err, ErrNotParked) {
		t.Fatalf("empty dir: %v, want ErrNotParked", err)
	}
	// A marker without a wake file: the Runtime has not parked yet.
	if err := d.WriteMarker("t"); err != nil {
		t.Fatal(err)
	}
	if err := d.Wake(); !errors.Is(err, ErrNotParked) {
		t.Fatalf("marker only: %v, want ErrNotParked", err)
	}
	// A wake file without a marker: the Runtime was woken already.
	if err := d.WriteWakeFile(p); err != nil {
		t.Fatal(err)
	}
	if _, err := d.RemoveMarker(); err != nil {
		t.Fatal(err)
	}
	if err := d.Wake(); !errors.Is(err, ErrNotParked) {
		t.Fatalf("wake file only: %v, want ErrNotParked", err)
	}
}
