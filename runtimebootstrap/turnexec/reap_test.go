package turnexec

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const prSetChildSubreaper = 36

func setSubreaper(t *testing.T, on bool) {
	t.Helper()
	v := uintptr(0)
	if on {
		v = 1
	}
	// Every Linux since 3.4 has it, unprivileged: a refusal is a failure,
	// never a skip (runtimebootstrap cannot import sandbox/testenv, whose
	// Unavailable would fail it under CI anyway).
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, v, 0); errno != 0 {
		t.Fatalf("prctl(PR_SET_CHILD_SUBREAPER): %v", errno)
	}
}

// TestReapOrphans makes the test process a subreaper, as PID 1 is, so that
// the grandchild of a timed-out Turn becomes its zombie; ReapOrphans must
// reap it.
func TestReapOrphans(t *testing.T) {
	setSubreaper(t, true)
	defer setSubreaper(t, false)
	r := testRunner(t)
	rec := newRecorder(t)
	res := r.Run(context.Background(), Turn{Script: "sleep 300 & echo $!; wait", Timeout: 300 * time.Millisecond}, rec.events())
	if res.Outcome != TimedOut {
		t.Fatalf("result %+v", res)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(rec.stdout()))
	if err != nil {
		t.Fatalf("stdout %q", rec.stdout())
	}
	deadline := time.Now().Add(10 * time.Second)
	for !zombieChildOf(pid, syscall.Getpid()) {
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d never became this process's zombie", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := ReapOrphans(); n != 1 {
		t.Fatalf("reaped %d, want 1", n)
	}
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		t.Fatalf("grandchild %d still exists after reaping: %v", pid, err)
	}
	if n := ReapOrphans(); n != 0 {
		t.Fatalf("second pass reaped %d", n)
	}
}

// TestReapOrphansLeavesTurnsAlone runs Turns while reaping in a loop: every
// Turn must still get its own exit status.
func TestReapOrphansLeavesTurnsAlone(t *testing.T) {
	setSubreaper(t, true)
	defer setSubreaper(t, false)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				ReapOrphans()
			}
		}
	}()
	r := testRunner(t)
	for i := range 30 {
		code := i % 5
		res, _ := run(t, r, Turn{Script: "exit " + strconv.Itoa(code)})
		if res.Outcome != Exited || res.ExitCode != code {
			t.Errorf("turn %d: result %+v, want exit %d", i, res, code)
		}
	}
	close(stop)
	<-done
}
