package berthctl

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"

	"berth.dev/sandbox/testenv"
	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal: the test reads master, berthctl writes
// to the terminal (tty) as it would to an operator's.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		testenv.Unavailable(t, "no pseudo-terminal (/dev/ptmx)")
	}
	t.Cleanup(func() { master.Close() })
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return master, tty
}

// readAll reads the terminal's output until its last writer closes it
// (reading a master then fails with EIO), in the background.
func readAll(master *os.File) <-chan []byte {
	done := make(chan []byte, 1)
	go func() {
		var b bytes.Buffer
		_, _ = io.Copy(&b, master)
		done <- b.Bytes()
	}()
	return done
}
