// Command berth-nodeagent serves the node protocol on one compute host.
//
//	berth-nodeagent serve --config /etc/berth/nodeagent.json
//	berth-nodeagent version
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	pb "berth.dev/proto/berth/sandboxnode/v1"

	"berth.dev/nodeagent"
)

var version = "dev"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "version":
		fmt.Fprintf(stdout, "berth-nodeagent %s (%s; %s)\n", version, runtime.Version(), pb.ProtocolVersion)
		return 0
	case "serve":
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(stderr)
		config := fs.String("config", "/etc/berth/nodeagent.json", "configuration file")
		if err := fs.Parse(args[1:]); err != nil || fs.NArg() != 0 {
			return 2
		}
		log := slog.New(slog.NewJSONHandler(stderr, nil))
		cfg, err := nodeagent.LoadConfig(*config)
		if err != nil {
			log.Error("configuration", "error", err.Error())
			return 1
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		if err := nodeagent.Serve(ctx, cfg, log, nil); err != nil {
			log.Error("node agent failed", "error", err.Error())
			return 1
		}
		return 0
	default:
		usage(stderr)
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: berth-nodeagent serve --config FILE | version")
}
