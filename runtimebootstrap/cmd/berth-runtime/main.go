// Command berth-runtime is the Runtime daemon that runs inside each sandbox.
//
// "berth-runtime connect" reads and validates the bootstrap file, then holds
// a berth.runtime.v1 connection to Core's runtime gateway (runtimeclient):
// it authenticates with the file's device id and credential, runs the Turns
// Core delivers under /workspace, and reconnects with backoff whenever the
// connection ends. Logs are JSON lines on stderr (log/slog) and never carry
// the credential. As PID 1 (the Docker adapter runs it without an init) it
// also reaps the orphans of killed Turns.
//
// Exit codes of connect:
//
//	0  stopped by SIGTERM or SIGINT
//	1  the bootstrap file is missing, unreadable, too open or invalid
//	2  usage error
//	3  Core stopped this Runtime for good (credential rejected, revoked or
//	   protocol mismatch); restarting it cannot help
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"berth.dev/runtimebootstrap"
	"berth.dev/runtimebootstrap/runtimeclient"
	"berth.dev/runtimebootstrap/turnexec"
)

// version is set at link time (-ldflags "-X main.version=...").
var version = "dev"

// Exit codes.
const (
	exitOK         = 0
	exitInvalid    = 1 // the bootstrap file is missing, unreadable, too open or invalid
	exitUsage      = 2
	exitStopped    = 3 // Core ended the connection with a stop-for-good reason
	defaultProfile = "default"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  berth-runtime connect [--profile default] [--bootstrap-file PATH]
  berth-runtime version
`

// run executes one invocation and returns its exit code. It returns from
// connect when ctx is done (a stop signal) or Core stops the Runtime for
// good.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "connect":
		return connect(ctx, args[1:], stderr)
	case "version":
		if len(args) != 1 {
			fmt.Fprint(stderr, usage)
			return exitUsage
		}
		fmt.Fprintf(stdout, "berth-runtime %s (%s %s/%s; bootstrap file version %d)\n",
			version, runtime.Version(), runtime.GOOS, runtime.GOARCH, runtimebootstrap.Version)
		return exitOK
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "berth-runtime: unknown command %q\n%s", args[0], usage)
		return exitUsage
	}
}

func connect(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("connect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	profile := fs.String("profile", defaultProfile, "connection profile (only \"default\" exists)")
	path := fs.String("bootstrap-file", runtimebootstrap.Path, "the Runtime bootstrap file (mode 0600 or stricter)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "berth-runtime connect: unexpected arguments\n%s", usage)
		return exitUsage
	}
	if *profile != defaultProfile {
		fmt.Fprintf(stderr, "berth-runtime connect: unknown profile %q (only %q exists)\n", *profile, defaultProfile)
		return exitUsage
	}

	// runtimebootstrap's errors never carry the credential, and the File
	// is not printed: its Secret would redact anyway.
	f, err := runtimebootstrap.ReadFile(*path)
	if err != nil {
		fmt.Fprintf(stderr, "berth-runtime: %v\n", err)
		return exitInvalid
	}
	logger := slog.New(slog.NewJSONHandler(stderr, nil))
	logger.Info("validated the bootstrap file", "device_id", f.DeviceID, "version", version)

	client, err := runtimeclient.New(runtimeclient.Config{Bootstrap: f, RuntimeVersion: version, Logger: logger})
	if err != nil {
		fmt.Fprintf(stderr, "berth-runtime: %v\n", err)
		return exitInvalid
	}
	if os.Getpid() == 1 {
		go reapOrphans(ctx)
	}
	err = client.Run(ctx)
	var stop *runtimeclient.StopError
	if errors.As(err, &stop) {
		fmt.Fprintf(stderr, "berth-runtime: core stopped this runtime for good (%s); exiting\n", stop.Reason)
		return exitStopped
	}
	logger.Info("stopping on signal")
	return exitOK
}

// reapOrphans reaps orphaned processes while berth-runtime is its sandbox's
// PID 1 (see turnexec.ReapOrphans): on every SIGCHLD, and every few seconds
// for zombies left while a Turn's own child was pending.
func reapOrphans(ctx context.Context) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	defer signal.Stop(sigs)
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sigs:
		case <-tick.C:
		}
		turnexec.ReapOrphans()
	}
}
