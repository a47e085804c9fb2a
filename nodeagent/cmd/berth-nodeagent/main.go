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

	"berth.dev/platform/otelsetup"
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
	case "enroll":
		return enroll(args[1:], stdout, stderr)
	case "serve":
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(stderr)
		config := fs.String("config", nodeagent.DefaultConfigFile, "configuration file")
		if err := fs.Parse(args[1:]); err != nil || fs.NArg() != 0 {
			return 2
		}
		log, cfg, ok := loadConfig(*config, stderr)
		if !ok {
			return 1
		}
		cfg.Version = version
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		// Traces only when the OTEL_* environment asks for them.
		shutdown, _, err := otelsetup.Traces(ctx, otelsetup.NodeAgentService, version, log)
		if err != nil {
			log.Error("telemetry", "error", err.Error())
			return 1
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), otelsetup.ShutdownTimeout)
			defer cancel()
			_ = shutdown(sctx)
		}()
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

// loadConfig makes the JSON logger on stderr that serve and enroll log
// with (a record logged inside a span carries its trace and span ids), and
// loads the configuration file at path; it returns false, having logged
// why, when the file is unusable.
func loadConfig(path string, stderr io.Writer) (*slog.Logger, nodeagent.Config, bool) {
	log := slog.New(otelsetup.LogHandler(slog.NewJSONHandler(stderr, nil)))
	cfg, err := nodeagent.LoadConfig(path)
	if err != nil {
		log.Error("configuration", "error", err.Error())
		return log, nodeagent.Config{}, false
	}
	return log, cfg, true
}

func enroll(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("enroll", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", nodeagent.DefaultConfigFile, "configuration file (for the state directory)")
	core := fs.String("core", "", "Core's enrollment address, host:port")
	tokenFile := fs.String("token-file", "", "file holding the enrollment token, or - for standard input")
	advertise := fs.String("advertise", "", "host:port where Core reaches this node agent")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 || *core == "" || *tokenFile == "" || *advertise == "" {
		fmt.Fprintln(stderr, "usage: berth-nodeagent enroll --config FILE --core HOST:PORT --token-file FILE|- --advertise HOST:PORT")
		return 2
	}
	log, cfg, ok := loadConfig(*config, stderr)
	if !ok {
		return 1
	}
	var token []byte
	var err error
	if *tokenFile == "-" {
		token, err = io.ReadAll(io.LimitReader(os.Stdin, 4096))
	} else {
		token, err = os.ReadFile(*tokenFile)
	}
	if err != nil {
		log.Error("cannot read the enrollment token")
		return 1
	}
	state, err := nodeagent.OpenStateDir(cfg.StateDir)
	if err != nil {
		log.Error("state directory", "error", err.Error())
		return 1
	}
	defer state.Close()
	ctx, cancel := context.WithTimeout(context.Background(), nodeagent.EnrollTimeout)
	defer cancel()
	id, err := nodeagent.Enroll(ctx, state, *core, string(token), *advertise)
	if err != nil {
		log.Error("enrollment failed", "error", err.Error())
		return 1
	}
	fmt.Fprintf(stdout, "enrolled node %s in installation %s\n", id.NodeID, id.InstallationID)
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: berth-nodeagent enroll --config FILE --core HOST:PORT --token-file FILE|- --advertise HOST:PORT | serve --config FILE | version")
}
