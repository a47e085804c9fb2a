package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/cmd/berthctl/internal/adminclient"
)

// callTimeout bounds every unary admin call; only a Turn's output stream
// and the waits of --wait run longer.
const callTimeout = 30 * time.Second

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

// app is one berthctl invocation: its streams, its environment, the
// global flags and, once a command needs it, the admin API connection.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string

	// flags are --address and --token-file; output is -o.
	flags  adminclient.Settings
	output string

	// started is set when a command's own code runs: an error before that
	// is cobra's (a bad flag, a missing argument), a usage error.
	started  bool
	settings adminclient.Settings
	cc       *grpc.ClientConn

	// The admin API's clients, over one connection dialled at the first
	// call (conn).
	installation adminv1.InstallationServiceClient
	nodes        adminv1.NodeServiceClient
	deployments  adminv1.DeploymentServiceClient
	sessions     adminv1.SessionServiceClient
	turns        adminv1.TurnServiceClient
	allocations  adminv1.AllocationServiceClient
	projects     adminv1.ProjectServiceClient
	audit        adminv1.AuditServiceClient
	files        adminv1.FileServiceClient
}

// newApp returns an invocation over its streams and environment.
func newApp(getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) *app {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	c := conn{a}
	a.installation = adminv1.NewInstallationServiceClient(c)
	a.nodes = adminv1.NewNodeServiceClient(c)
	a.deployments = adminv1.NewDeploymentServiceClient(c)
	a.sessions = adminv1.NewSessionServiceClient(c)
	a.turns = adminv1.NewTurnServiceClient(c)
	a.allocations = adminv1.NewAllocationServiceClient(c)
	a.projects = adminv1.NewProjectServiceClient(c)
	a.audit = adminv1.NewAuditServiceClient(c)
	a.files = adminv1.NewFileServiceClient(c)
	return a
}

// run executes one command line and returns the exit status: 0 on
// success, 1 when the command or the admin API failed, 2 for a usage
// error, and for `turn run` the Turn's own exit status.
func run(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := newApp(getenv, stdin, stdout, stderr)
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if a.cc != nil {
		_ = a.cc.Close()
	}
	return a.exitCode(err)
}

// exitCode prints err (never the token: no error carries it) and returns
// the status it ends berthctl with.
func (a *app) exitCode(err error) int {
	var (
		usage *usageError
		exit  *exitError
	)
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		if exit.msg != "" {
			fmt.Fprintf(a.stderr, "error: %s\n", exit.msg)
		}
		return exit.code
	case errors.As(err, &usage) || !a.started:
		fmt.Fprintf(a.stderr, "error: %v\n", err)
		path := "berthctl"
		if usage != nil && usage.cmd != nil {
			path = usage.cmd.CommandPath()
		}
		fmt.Fprintf(a.stderr, "Run '%s --help' for usage.\n", path)
		return 2
	case adminclient.Unreachable(err):
		fmt.Fprintf(a.stderr, "error: core_unreachable: cannot reach the admin API at %s (is berth-core running?): %s\n", a.settings.Address, status.Convert(err).Message())
		return 1
	default:
		fmt.Fprintf(a.stderr, "error: %s\n", adminclient.Describe(err))
		return 1
	}
}

// usageError is a command line berthctl cannot run: exit status 2.
type usageError struct {
	cmd *cobra.Command
	err error
}

func (e *usageError) Error() string { return e.err.Error() }

func usagef(cmd *cobra.Command, format string, args ...any) error {
	return &usageError{cmd: cmd, err: fmt.Errorf(format, args...)}
}

// exitError ends berthctl with code after printing msg ("error: msg")
// when it is not empty: a Turn's exit status, or its end other than
// completion.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d: %s", e.code, e.msg) }

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "berthctl",
		Short: "berthctl is the admin CLI of a Berth installation",
		Long: `berthctl drives Core's admin API (berth.admin.v1).

Run 'berthctl login --address HOST:PORT --token-file PATH' once: it keeps the
admin API's address and the path of the admin token file (never the token)
in $` + adminclient.ConfigEnv + ` or ~/.config/berth/berthctl.json. --address and
--token-file, or $` + adminclient.AddressEnv + ` and $` + adminclient.TokenFileEnv + `, override it.

Tables are for people; -o json prints the API's response messages
(protojson) for scripts. Errors print the API's fixed reason and a message
that says what to do, and exit 1; a bad command line exits 2.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE:          a.group,
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return &usageError{cmd: cmd, err: err} })
	pf := root.PersistentFlags()
	pf.StringVar(&a.flags.Address, "address", "", "admin API address HOST:PORT (default $"+adminclient.AddressEnv+", then the login config)")
	pf.StringVar(&a.flags.TokenFile, "token-file", "", "file holding the admin token (default $"+adminclient.TokenFileEnv+", then the login config)")
	pf.StringVarP(&a.output, "output", "o", "table", "output format: table or json")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if a.output != "table" && a.output != "json" {
			return usagef(cmd, "invalid -o %q: table or json", a.output)
		}
		return nil
	}
	root.AddCommand(a.loginCmd(), a.installationCmd(), a.nodeCmd(), a.deploymentCmd(), a.sessionCmd(), a.turnCmd(), a.allocCmd())
	root.AddCommand(a.tenantCmd(), a.projectCmd(), a.keyCmd(), a.auditCmd(), a.cpCmd())
	return root
}

// group is the RunE of a command that only holds subcommands.
func (a *app) group(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef(cmd, "unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return usagef(cmd, "%s needs a command", cmd.CommandPath())
}

// command returns a cobra command running f, which marks the start of
// the command's own work (see app.started).
func (a *app) command(use, short string, args cobra.PositionalArgs, f func(cmd *cobra.Command, args []string) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args,
		RunE: func(cmd *cobra.Command, args []string) error {
			a.started = true
			return f(cmd, args)
		},
	}
}

// groupCmd returns a command holding subs.
func (a *app) groupCmd(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, RunE: a.group}
	c.AddCommand(subs...)
	return c
}

// exactArgs wants exactly the named arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == len(names):
			return nil
		case len(names) == 0:
			return usagef(cmd, "%s takes no arguments", cmd.CommandPath())
		}
		return usagef(cmd, "%s takes %s (got %d arguments)", cmd.CommandPath(), strings.Join(names, " "), len(args))
	}
}

// minArgs wants the named arguments and any after them.
func minArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < len(names) {
			return usagef(cmd, "%s needs %s", cmd.CommandPath(), strings.Join(names, " "))
		}
		return nil
	}
}

// dial connects to the admin API once, with the resolved settings.
func (a *app) dial() (*grpc.ClientConn, error) {
	if a.cc != nil {
		return a.cc, nil
	}
	// Flags and the environment may say everything: the file is then
	// not read.
	if s := adminclient.Resolve(a.flags, a.getenv, adminclient.Settings{}); s.Address != "" && s.TokenFile != "" {
		return a.connect(s)
	}
	path, err := adminclient.ConfigPath(a.getenv)
	if err != nil {
		return nil, err
	}
	stored, err := adminclient.LoadSettings(path)
	if err != nil {
		return nil, err
	}
	return a.connect(adminclient.Resolve(a.flags, a.getenv, stored))
}

// connect checks s, reads the token from its file and dials.
func (a *app) connect(s adminclient.Settings) (*grpc.ClientConn, error) {
	a.settings = s
	if err := s.Check(); err != nil {
		return nil, err
	}
	token, err := adminclient.ReadToken(s.TokenFile)
	if err != nil {
		return nil, err
	}
	a.cc, err = adminclient.Dial(s.Address, token)
	return a.cc, err
}

// conn is the admin API connection of a's clients: it dials (a.dial:
// the settings, the token from its file, the loopback check) at the
// first call, so building the commands reads no configuration.
type conn struct{ a *app }

// Invoke dials once and runs a unary call.
func (c conn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	cc, err := c.a.dial()
	if err != nil {
		return err
	}
	return cc.Invoke(ctx, method, args, reply, opts...)
}

// NewStream dials once and opens a stream.
func (c conn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cc, err := c.a.dial()
	if err != nil {
		return nil, err
	}
	return cc.NewStream(ctx, desc, method, opts...)
}

// call is berthctl's one unary admin call: method (a client's, which
// dials and authenticates through conn) with req, bounded by callTimeout,
// its error decoded through the admin API's codec (adminclient.Decode);
// exitCode prints it.
func call[Req, Resp any](method func(context.Context, Req, ...grpc.CallOption) (Resp, error), req Req) (Resp, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	resp, err := method(ctx, req)
	return resp, adminclient.Decode(err)
}

// absPath makes a relative path absolute, so a stored path works from
// any working directory.
func absPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}
