package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"berth.dev/core/store"
)

// version is the release, set at build time with
// -ldflags "-X main.version=<v>".
var version = "dev"

// databaseURLEnv names the variable that may carry the database URL.
const databaseURLEnv = "BERTH_DATABASE_URL"

const usage = `usage:
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
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "berth-core migrate: unexpected arguments\n%s", usage)
		return 2
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
