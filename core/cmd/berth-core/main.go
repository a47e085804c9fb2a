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
	"path/filepath"
	"syscall"

	"berth.dev/platform/otelsetup"

	"berth.dev/core/daemon"
	"berth.dev/core/reset"
	"berth.dev/core/store"
	"berth.dev/sandbox"
)

// version is the release, set at build time with
// -ldflags "-X main.version=<v>".
var version = "dev"

// databaseURLEnv names the variable that may carry the database URL.
const databaseURLEnv = "BERTH_DATABASE_URL"

const usage = `usage:
  berth-core serve [flags]                  run Core (serve --help lists the flags)
  berth-core migrate [--database-url URL]   apply the database migrations
  berth-core version                        print the version

The database URL may also come from $` + databaseURLEnv + `.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit status: 0 on
// success, 1 when the command failed, 2 for a usage error.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "version":
		if len(args) != 1 {
			fmt.Fprint(stderr, usage)
			return 2
		}
		fmt.Fprintf(stdout, "berth-core %s (schema version %d)\n", version, store.SchemaVersion())
		return 0
	case "migrate":
		return migrate(ctx, args[1:], getenv, stdout, stderr)
	case "serve":
		return serve(ctx, args[1:], getenv, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "berth-core: unknown command %q\n%s", args[0], usage)
		return 2
	}
}

func migrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	databaseURL := fs.String("database-url", "", "PostgreSQL connection URL (default $"+databaseURLEnv+")")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	dsn := *databaseURL
	if dsn == "" {
		dsn = getenv(databaseURLEnv)
	}
	if dsn == "" {
		fmt.Fprintf(stderr, "berth-core migrate: no database: pass --database-url or set %s\n", databaseURLEnv)
		return 2
	}
	// Errors from the store never quote the URL.
	if err := store.Migrate(ctx, dsn); err != nil {
		fmt.Fprintf(stderr, "berth-core: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "schema at version %d\n", store.SchemaVersion())
	return 0
}

// parse parses the flags of subcommand fs, which takes no arguments. When
// it is not ok the command ends with code: 0 after --help, 2 after a bad
// flag (which fs reported) or an argument.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "berth-core %s: unexpected arguments\n%s", fs.Name(), usage)
		return 2, false
	}
	return 0, true
}

// serveFlags is serve's flag set, writing into cfg. Every default comes
// from core/daemon's defaults.go, so --help prints what Core runs with.
func serveFlags(cfg *daemon.Config, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.DatabaseURL, "database-url", "", "PostgreSQL connection URL (default $"+databaseURLEnv+")")
	fs.BoolVar(&cfg.Migrate, "migrate", false, "apply database migrations at start-up")
	fs.StringVar(&cfg.PublicURL, "public-url", "", "the installation's public URL (used when the installation is first claimed)")
	fs.StringVar(&cfg.StateDir, "state-dir", daemon.DefaultStateDir, "state directory: master key and admin token (mode 0700)")
	fs.StringVar(&cfg.MasterKeyFile, "master-key-file", "", "master key file shared by every Core of the installation (default STATE_DIR/master.key, created on first start)")
	fs.StringVar(&cfg.AdminListen, "admin-listen", daemon.DefaultAdminListen, "admin API address (loopback only)")
	fs.StringVar(&cfg.Listen, "listen", daemon.DefaultListen, "public address: node enrollment over TLS")
	fs.StringVar(&cfg.RuntimeListen, "runtime-listen", "", "Runtime gateway address (berth.runtime.v1 over TLS) that --public-url names; empty: no gateway, Runtimes cannot connect")
	fs.StringVar(&cfg.RuntimeTLSCertFile, "runtime-tls-cert", "", "PEM certificate chain of the Runtime gateway (with --runtime-tls-key); default: one issued from the installation CA for the public URL's host")
	fs.StringVar(&cfg.RuntimeTLSKeyFile, "runtime-tls-key", "", "PEM private key of --runtime-tls-cert")
	fs.BoolVar(&cfg.RuntimeInsecure, "runtime-insecure", false, "serve the Runtime gateway in plaintext (an http public URL on a private network, or a TLS-terminating proxy in front): device credentials cross in clear")
	fs.StringVar(&cfg.MetricsListen, "metrics-listen", "", "Prometheus metrics address (GET /metrics, plain HTTP); empty: no metrics")
	fs.DurationVar(&cfg.RuntimeKeepalive, "runtime-keepalive", daemon.DefaultRuntimeKeepalive, "interval of the gateway's keepalives to idle Runtimes")
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", daemon.DefaultLeaseTTL, "execution lease lifetime")
	fs.DurationVar(&cfg.NodeInterval, "node-interval", daemon.DefaultNodeInterval, "how often node connections are reconciled")
	fs.DurationVar(&cfg.LifecycleInterval, "lifecycle-interval", daemon.DefaultLifecycleInterval, "wait between a node worker's lifecycle passes")
	fs.DurationVar(&cfg.CreateAbandonAfter, "create-abandon-after", daemon.DefaultCreateAbandonAfter, "how long a Create's outcome may stay unknown before it is abandoned and the Session gets a new allocation (at least 1s)")
	fs.DurationVar(&cfg.QuiesceTimeout, "quiesce-timeout", daemon.DefaultQuiesceTimeout, "how long an armed suspension waits for the Runtime to quiesce before it is aborted (at least 1s)")
	fs.DurationVar(&cfg.RestoreAbandonAfter, "restore-abandon-after", daemon.DefaultRestoreAbandonAfter, "how long a restore's outcome may stay unknown, with the restore's incarnation observed not running, before that incarnation is removed and the restore done again into a new one (at least 1s); a restore whose observation fails or finds nothing is never redone")
	fs.DurationVar(&cfg.AuditRetention, "audit-retention", daemon.DefaultAuditRetention, "how long audit events are kept, on the database clock (at least 24h; 0 is refused: the trail is never kept forever); the owner sweeps hourly")
	fs.DurationVar(&cfg.ResetMinTimeout, "reset-min-timeout", reset.MinTimeout, "the shortest deadline StartReset accepts (for tests: production keeps the default)")
	return fs
}

// processPaths derives the fixed distribution paths of direct provider
// adapters once, from where this executable is installed and from the
// state directory: Root is <dir of the executable>/../lib/berth
// (/usr/lib/berth for the packaged /usr/bin/berth-core), State is
// <state-dir>/providers. Never from the environment.
func processPaths(stateDir string) (sandbox.ProcessPaths, error) {
	exe, err := os.Executable()
	if err != nil {
		return sandbox.ProcessPaths{}, err
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return sandbox.ProcessPaths{}, err
	}
	state, err := filepath.Abs(stateDir)
	if err != nil {
		return sandbox.ProcessPaths{}, err
	}
	p := sandbox.ProcessPaths{
		Root:  filepath.Join(filepath.Dir(exe), "..", "lib", "berth"),
		State: filepath.Join(state, "providers"),
	}
	return p, p.Validate()
}

func serve(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	var (
		cfg daemon.Config
		err error
	)
	fs := serveFlags(&cfg, stderr)
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if cfg.AuditRetention == 0 {
		// Config reads 0 as the default; on the command line it is refused.
		fmt.Fprintf(stderr, "berth-core serve: --audit-retention must be at least 24h\n")
		return 2
	}
	if cfg.DatabaseURL == "" {
		cfg.DatabaseURL = getenv(databaseURLEnv)
	}
	if cfg.DatabaseURL == "" || cfg.PublicURL == "" {
		fmt.Fprintf(stderr, "berth-core serve: --database-url (or $%s) and --public-url are required\n", databaseURLEnv)
		return 2
	}
	cfg.Version = version
	// A record logged inside a span carries its trace and span ids.
	log := slog.New(otelsetup.LogHandler(slog.NewJSONHandler(stderr, nil)))
	if cfg.ProcessPaths, err = processPaths(cfg.StateDir); err != nil {
		// Only a direct provider needs them; it is then recorded not
		// ready (build_failed), and node providers run as ever.
		log.Warn("no process paths for direct providers", "error", err.Error())
	}
	// Traces only when the OTEL_* environment asks for them.
	shutdown, _, err := otelsetup.Traces(ctx, otelsetup.CoreService, version, log)
	if err != nil {
		log.Error("telemetry", "error", err.Error())
		return 2
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), otelsetup.ShutdownTimeout)
		defer cancel()
		_ = shutdown(sctx)
	}()
	if err := daemon.Run(ctx, cfg, log, nil); err != nil {
		log.Error("berth-core stopped", "error", err.Error())
		return 1
	}
	return 0
}
