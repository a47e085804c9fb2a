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
	"berth.dev/runtimebootstrap/internal/park"
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
	exitNotParked  = runtimebootstrap.WakeNotParked
	exitGone       = runtimebootstrap.WakeGone
	exitPark       = 6 // the park marker or wake file failed
	defaultProfile = "default"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  berth-runtime connect [--profile default] [--bootstrap-file PATH] [--allow-insecure-core]
  berth-runtime wake [--bootstrap-file PATH]
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
	case "wake":
		return wake(args[1:], stderr)
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

// allowInsecureEnv set to 1 in a Runtime image's environment allows an
// http core_url to a public host, like --allow-insecure-core (the adapter
// gives the command line, an image its environment).
const allowInsecureEnv = "BERTH_RUNTIME_ALLOW_INSECURE_CORE"

func connect(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("connect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	profile := fs.String("profile", defaultProfile, "connection profile (only \"default\" exists)")
	path := fs.String("bootstrap-file", runtimebootstrap.Path, "the Runtime bootstrap file (mode 0600 or stricter)")
	allowInsecure := fs.Bool("allow-insecure-core", os.Getenv(allowInsecureEnv) == "1",
		"allow an http core_url whose host is not a loopback or private address (default from $"+allowInsecureEnv+"=1)")
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

	client, err := runtimeclient.New(runtimeclient.Config{Bootstrap: f, BootstrapPath: *path, RuntimeVersion: version, Logger: logger,
		AllowInsecure: *allowInsecure})
	if err != nil {
		fmt.Fprintf(stderr, "berth-runtime: %v\n", err)
		return exitInvalid
	}
	if os.Getpid() == 1 {
		go reapOrphans(ctx)
	}
	switch woken, err := parkIfMarked(ctx, park.DirOf(*path), logger); {
	case err != nil:
		fmt.Fprintf(stderr, "berth-runtime: parked start: %v\n", err)
		return exitPark
	case !woken:
		logger.Info("stopping on signal")
		return exitOK
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

// parkIfMarked returns at once (woken) when dir holds no park marker.
// Otherwise the Runtime is parked: it waits for SIGUSR1 without connecting
// to Core, then removes the wake file and the marker. It returns woken
// false when ctx ends first; the marker then stays, so a restart parks
// again.
func parkIfMarked(ctx context.Context, dir park.Dir, logger *slog.Logger) (woken bool, err error) {
	parked, err := dir.Parked()
	if err != nil || !parked {
		return err == nil, err
	}
	// Listen before the wake file exists: wake signals only the process
	// that file names, so no SIGUSR1 can come before this. (Go ignores a
	// SIGUSR1 nobody listens for, and so does the kernel for a PID 1
	// without a handler: a stray one never kills the Runtime.)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR1)
	defer signal.Stop(sigs)
	self, err := park.Self()
	if err != nil {
		return false, err
	}
	if err := dir.WriteWakeFile(self); err != nil {
		return false, err
	}
	logger.Info("parked for a planned suspension; waiting for berth-runtime wake", "pid", self.PID)
	select {
	case <-ctx.Done():
		// Nothing listens any more: wake must say so.
		if err := dir.RemoveWakeFile(); err != nil {
			logger.Error("the wake file could not be removed")
		}
		return false, nil
	case <-sigs:
	}
	// The wake file first: from then on wake answers "no parked runtime".
	if err := dir.RemoveWakeFile(); err != nil {
		return false, err
	}
	if _, err := dir.RemoveMarker(); err != nil {
		return false, err
	}
	logger.Info("woken from parking; connecting to core")
	return true, nil
}

// wake signals the Runtime parked next to the bootstrap file (see the
// command doc). Its stderr carries only fixed lines and step errors, never
// the files' content.
func wake(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("wake", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("bootstrap-file", runtimebootstrap.Path, "the Runtime bootstrap file; the parked state lies next to it")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "berth-runtime wake: unexpected arguments\n%s", usage)
		return exitUsage
	}
	switch err := park.DirOf(*path).Wake(); {
	case err == nil:
		return exitOK
	case errors.Is(err, park.ErrNotParked):
		fmt.Fprintln(stderr, "berth-runtime: no parked runtime")
		return exitNotParked
	case errors.Is(err, park.ErrGone):
		fmt.Fprintln(stderr, "berth-runtime: parked runtime process is gone")
		return exitGone
	default:
		fmt.Fprintf(stderr, "berth-runtime: wake: %v\n", err)
		return exitPark
	}
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
