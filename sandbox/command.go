package sandbox

import (
	"fmt"
	"path"
	"strings"

	"berth.dev/sandbox/errdefs"
)

// Command bounds.
const (
	MaxCommandArgs      = 256
	MaxCommandArgsBytes = 64 << 10
	MaxCommandStdin     = 1 << 20
	// DefaultOutputLimit bounds each of stdout and stderr when the Command
	// sets no OutputLimit.
	DefaultOutputLimit = 1 << 20
	MaxOutputLimit     = 16 << 20
)

// Command is a bounded command to run in an allocation's compute.
// Confidential input travels only in Stdin, never in Args, and Stdin never
// formats (see Format).
type Command struct {
	Args []string
	// Directory is an absolute working directory, or "" for the default.
	Directory string
	Stdin     []byte
	// OutputLimit bounds each output stream in bytes (0: DefaultOutputLimit).
	OutputLimit int
}

// Limit returns the effective per-stream output bound.
func (c Command) Limit() int {
	if c.OutputLimit == 0 {
		return DefaultOutputLimit
	}
	return c.OutputLimit
}

// Validate checks the command's bounds.
func (c Command) Validate() error {
	if len(c.Args) == 0 || c.Args[0] == "" {
		return errdefs.Invalid("command.args", "must name a program")
	}
	if len(c.Args) > MaxCommandArgs {
		return errdefs.Invalid("command.args", "too many arguments")
	}
	total := 0
	for _, a := range c.Args {
		total += len(a)
		if strings.IndexByte(a, 0) >= 0 {
			return errdefs.Invalid("command.args", "must not contain NUL")
		}
	}
	if total > MaxCommandArgsBytes {
		return errdefs.Invalid("command.args", "too long")
	}
	if c.Directory != "" && (!path.IsAbs(c.Directory) || path.Clean(c.Directory) != c.Directory ||
		strings.IndexByte(c.Directory, 0) >= 0) {
		return errdefs.Invalid("command.directory", "must be a clean absolute path")
	}
	if len(c.Stdin) > MaxCommandStdin {
		return errdefs.Invalid("command.stdin", "too large")
	}
	if c.OutputLimit < 0 || c.OutputLimit > MaxOutputLimit {
		return errdefs.Invalid("command.output_limit", "out of bounds")
	}
	return nil
}

// Format prints the command without its stdin, for every verb.
func (c Command) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "Command{Args:%q Directory:%q Stdin:[%d bytes redacted] OutputLimit:%d}",
		c.Args, c.Directory, len(c.Stdin), c.OutputLimit)
}

// CommandResult is a settled command's outcome: each stream's bytes in
// order, bounded, with truncation reported, and the actual exit code. A
// nonzero exit code is a settled command failure, not an error.
type CommandResult struct {
	Stdout          []byte
	Stderr          []byte
	StdoutTruncated bool
	StderrTruncated bool
	ExitCode        int
}
