package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/cmd/berthctl/internal/adminclient"
)

// The exit statuses of `turn run` when the Turn did not complete (a
// completed Turn's is its command's): a shell's for an interrupted
// command and timeout(1)'s; 1 for a Turn that failed or is unconfirmed,
// as for any other error.
const (
	exitCancelled = 130
	exitTimedOut  = 124
)

// cancelWait bounds how long `turn run` waits for the Turn to end once
// Ctrl-C requested its cancellation.
const cancelWait = 15 * time.Second

// streamRetries bounds how often `turn run` reopens a Turn's output
// stream that Core dropped (a restart), a second apart, resuming from the
// offsets it has written.
const streamRetries = 30

func (a *app) turnCmd() *cobra.Command {
	return a.groupCmd("turn", "Run commands in Sessions and inspect Turns (TurnService)",
		a.turnRunCmd(), a.turnListCmd(), a.turnGetCmd(), a.turnCancelCmd())
}

func (a *app) turnRunCmd() *cobra.Command {
	var f runFlags
	run := a.command("run SESSION -- CMD [ARG...]", "Run a command in a Session and stream its output", minArgs("SESSION"), func(cmd *cobra.Command, args []string) error {
		return a.turnRun(cmd, args, f)
	})
	run.Long = `run submits a Turn to the Session, streams its standard output and error
live to berthctl's, and exits with the command's exit status. A Turn that
did not complete exits 130 (cancelled), 124 (timed out) or 1 (failed, or
its completion is unconfirmed: a Turn never runs twice) with the reason on
stderr.

The command runs without a shell (argv, resolved through PATH) unless
--shell gives a script for /bin/sh -c. Its stdin is --stdin FILE (- for
berthctl's stdin), or berthctl's stdin when that is not a terminal (a pipe
or a file); otherwise it is empty. Ctrl-C cancels the Turn (CancelTurn),
waits up to 15 s for it to end and exits 130; a second Ctrl-C stops
waiting at once.`
	run.Example = `  berthctl turn run sessions/0b6e... -- ls -l /workspace
  echo hello | berthctl turn run 0b6e... -- cat
  berthctl turn run 0b6e... --shell 'make test' --timeout 10m --env GOFLAGS`
	fs := run.Flags()
	fs.StringVar(&f.stdinFile, "stdin", "", "file to send as the command's stdin (- for berthctl's stdin)")
	fs.StringVar(&f.shell, "shell", "", "run this script with /bin/sh -c instead of a command after --")
	fs.StringArrayVar(&f.env, "env", nil, "NAME=VALUE, or NAME to pass berthctl's own value (kept out of argv); repeatable")
	fs.StringVar(&f.workdir, "workdir", "", "absolute working directory in the sandbox (default /workspace)")
	fs.DurationVar(&f.timeout, "timeout", 0, "stop the command after this long (default: Core's)")
	fs.DurationVar(&f.queueTimeout, "queue-timeout", 0, "fail the Turn if its Runtime has not taken it within this long (default: 5m)")
	fs.StringVar(&f.requestID, "request-id", "", "UUID that makes a retried submission idempotent (default: a new one)")
	return run
}

func (a *app) turnListCmd() *cobra.Command {
	var p page
	ls := a.command("list SESSION", "List a Session's Turns in submission order", exactArgs("SESSION"), func(cmd *cobra.Command, args []string) error {
		parent := name("sessions", args[0])
		turns, next, err := list(p, func(size int32, token string) ([]*adminv1.Turn, string, error) {
			resp, err := call(a.turns.ListTurns, &adminv1.ListTurnsRequest{Parent: parent, PageSize: size, PageToken: token})
			return resp.GetTurns(), resp.GetNextPageToken(), err
		})
		if err != nil {
			return err
		}
		err = a.show(&adminv1.ListTurnsResponse{Turns: turns, NextPageToken: next}, func(w io.Writer) {
			row(w, "NAME", "STATE", "EXIT", "STDOUT", "STDERR", "CREATED", "ENDED", "COMMAND")
			for _, t := range turns {
				row(w, t.GetName(), turnState(t), exitCode(t), fmt.Sprint(t.GetStdoutBytes()), fmt.Sprint(t.GetStderrBytes()),
					ts(t.GetCreateTime()), ts(t.GetEndTime()), oneLine(command(t.GetCommand()), 40))
			}
		})
		a.more(next)
		return err
	})
	p.flags(ls.Flags())
	return ls
}

func (a *app) turnGetCmd() *cobra.Command {
	return a.command("get TURN", "Show one Turn (sessions/S/turns/T)", exactArgs("TURN"), func(cmd *cobra.Command, args []string) error {
		resp, err := call(a.turns.GetTurn, &adminv1.GetTurnRequest{Name: args[0]})
		if err != nil {
			return err
		}
		return a.show(resp, func(w io.Writer) { turnFields(w, resp.GetTurn()) })
	})
}

func (a *app) turnCancelCmd() *cobra.Command {
	return a.command("cancel TURN", "Request a Turn's cancellation (sessions/S/turns/T)", exactArgs("TURN"), func(cmd *cobra.Command, args []string) error {
		resp, err := call(a.turns.CancelTurn, &adminv1.CancelTurnRequest{Name: args[0]})
		if err != nil {
			return err
		}
		return a.show(resp, func(w io.Writer) { turnFields(w, resp.GetTurn()) })
	})
}

// runFlags are `turn run`'s flags.
type runFlags struct {
	stdinFile, shell, workdir, requestID string
	env                                  []string
	timeout, queueTimeout                time.Duration
}

func (a *app) turnRun(cmd *cobra.Command, args []string, f runFlags) error {
	if a.output == "json" {
		return usagef(cmd, "turn run prints the command's own output: 'berthctl turn get TURN -o json' shows the Turn")
	}
	if at := cmd.ArgsLenAtDash(); at > 1 {
		return usagef(cmd, "give one SESSION before --: berthctl turn run SESSION -- CMD [ARG...]")
	}
	argv := args[1:]
	turn := &adminv1.Turn{WorkingDirectory: f.workdir}
	switch {
	case f.shell != "" && len(argv) > 0:
		return usagef(cmd, "give either --shell SCRIPT or a command after --, not both")
	case f.shell != "":
		turn.Command = &adminv1.Command{Program: &adminv1.Command_ShellScript{ShellScript: f.shell}}
	case len(argv) > 0:
		turn.Command = &adminv1.Command{Program: &adminv1.Command_Argv{Argv: &adminv1.Argv{Args: argv}}}
	default:
		return usagef(cmd, "turn run needs a command after -- (or --shell SCRIPT)")
	}
	if f.timeout != 0 {
		turn.Timeout = durationpb.New(f.timeout)
	}
	if f.queueTimeout != 0 {
		turn.QueueTimeout = durationpb.New(f.queueTimeout)
	}
	for _, e := range f.env {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			if v = a.getenv(k); v == "" {
				return adminclient.Errorf("env_unset", "--env %s passes berthctl's own %s, which is unset or empty: set it or give --env %s=VALUE", k, k, k)
			}
		}
		if turn.Env == nil {
			turn.Env = map[string]string{}
		}
		turn.Env[k] = v
	}
	stdin, err := a.turnStdin(f.stdinFile)
	if err != nil {
		return err
	}
	turn.Stdin = stdin

	// From here Ctrl-C cancels the Turn instead of ending berthctl; one
	// pressed during the submission is handled as soon as it returns, so
	// a Turn is never left running unseen.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	req := &adminv1.SubmitTurnRequest{Parent: name("sessions", args[0]), RequestId: f.requestID, Turn: turn}
	if req.RequestId == "" {
		req.RequestId = uuid.NewString()
	}
	resp, err := call(a.turns.SubmitTurn, req)
	if err != nil {
		return err
	}
	return a.follow(resp.GetTurn().GetName(), sigs)
}

// turnStdin is the Turn's stdin: --stdin's file, or berthctl's stdin when
// it is not a terminal, at most a request's size (Core refuses more than
// its own bound with the reason).
func (a *app) turnStdin(file string) ([]byte, error) {
	switch {
	case file != "":
		return readBounded(file, a.stdin)
	case a.stdin == nil || isTerminal(a.stdin):
		return nil, nil
	default:
		return readBounded("-", a.stdin)
	}
}

// chunk is output to write: data of one stream.
type chunk struct {
	stream adminv1.OutputStream
	data   []byte
}

// follow streams the Turn's output to stdout and stderr until the Turn
// ends and returns its outcome (exitError). A signal cancels the Turn.
func (a *app) follow(turn string, sigs <-chan os.Signal) error {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	out := make(chan chunk)
	ended := make(chan error, 1)
	go func() { ended <- streamOutput(ctx, a.turns, turn, out) }()

	p := a.progress()
	defer p.clear()
	var tick <-chan time.Time
	if p.on {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		tick = t.C
		p.show("%s: submitted", turn)
	}
	var (
		interrupted bool
		giveUp      <-chan time.Time
	)
	for {
		select {
		case c := <-out:
			// Output replaces the progress line for good.
			p.clear()
			tick = nil
			w := a.stdout
			if c.stream == adminv1.OutputStream_OUTPUT_STREAM_STDERR {
				w = a.stderr
			}
			if _, err := w.Write(c.data); err != nil {
				return err
			}
		case err := <-ended:
			p.clear()
			if err != nil {
				return err
			}
			return a.outcome(turn, interrupted)
		case <-tick:
			resp, err := call(a.turns.GetTurn, &adminv1.GetTurnRequest{Name: turn})
			switch {
			case err != nil:
			case resp.GetTurn().GetState() == adminv1.Turn_STATE_QUEUED:
				p.show("%s: queued, waiting for the Session's Runtime", turn)
			default:
				p.show("%s: %s", turn, turnState(resp.GetTurn()))
			}
		case <-sigs:
			p.clear()
			if interrupted {
				return &exitError{code: exitCancelled, msg: fmt.Sprintf("interrupted: stopped waiting for %s, whose cancellation was requested: 'berthctl turn get %s' shows how it ended", turn, turn)}
			}
			interrupted = true
			fmt.Fprintf(a.stderr, "berthctl: cancelling %s (Ctrl-C again to stop waiting)\n", turn)
			if _, err := call(a.turns.CancelTurn, &adminv1.CancelTurnRequest{Name: turn}); err != nil {
				return err
			}
			giveUp = time.After(cancelWait)
		case <-giveUp:
			return &exitError{code: exitCancelled, msg: fmt.Sprintf("turn_cancel_pending: %s was asked to cancel and has not ended within %s: 'berthctl turn get %s' shows how it ends", turn, cancelWait, turn)}
		}
	}
}

// streamOutput sends the Turn's output to out, from the start, until the
// stream ends with the Turn. A stream Core dropped is reopened from the
// offsets already sent, so every byte is sent once, in order.
func streamOutput(ctx context.Context, api adminv1.TurnServiceClient, turn string, out chan<- chunk) error {
	sent := map[adminv1.OutputStream]int64{}
	for retries := 0; ; retries++ {
		st, err := api.StreamTurnOutput(ctx, &adminv1.StreamTurnOutputRequest{
			Name:         turn,
			StdoutOffset: sent[adminv1.OutputStream_OUTPUT_STREAM_STDOUT],
			StderrOffset: sent[adminv1.OutputStream_OUTPUT_STREAM_STDERR],
		})
		for err == nil {
			var m *adminv1.StreamTurnOutputResponse
			if m, err = st.Recv(); errors.Is(err, io.EOF) {
				return nil
			} else if err != nil {
				break
			}
			retries = 0
			s, data := m.GetStream(), m.GetData()
			if s != adminv1.OutputStream_OUTPUT_STREAM_STDOUT && s != adminv1.OutputStream_OUTPUT_STREAM_STDERR {
				continue
			}
			// A reopened stream may repeat what was sent.
			if skip := sent[s] - m.GetOffset(); skip > 0 {
				data = data[min(skip, int64(len(data))):]
			}
			if len(data) == 0 {
				continue
			}
			sent[s] = m.GetOffset() + int64(len(m.GetData()))
			select {
			case out <- chunk{stream: s, data: data}:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if !adminclient.Unreachable(err) || retries >= streamRetries {
			return adminclient.Decode(err)
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// outcome reads how the Turn ended and returns berthctl's exit for it.
func (a *app) outcome(turn string, interrupted bool) error {
	resp, err := call(a.turns.GetTurn, &adminv1.GetTurnRequest{Name: turn})
	if err != nil {
		return err
	}
	t := resp.GetTurn()
	switch t.GetState() {
	case adminv1.Turn_STATE_COMPLETED:
		code := int(t.GetExitCode())
		switch {
		case code == 0 && interrupted:
			return &exitError{code: exitCancelled, msg: fmt.Sprintf("interrupted: %s completed (exit status 0) before its cancellation took effect", turn)}
		case code == 0:
			return nil
		case code < 0 || code > 255:
			code = 1
		}
		return &exitError{code: code}
	case adminv1.Turn_STATE_CANCELLED:
		return &exitError{code: exitCancelled, msg: fmt.Sprintf("turn_cancelled: %s was cancelled", turn)}
	case adminv1.Turn_STATE_TIMED_OUT:
		return &exitError{code: exitTimedOut, msg: fmt.Sprintf("turn_timed_out: %s ran past its timeout (%s) and was stopped", turn, dur(t.GetTimeout()))}
	case adminv1.Turn_STATE_FAILED:
		return &exitError{code: 1, msg: fmt.Sprintf("%s: %s could not be run", dash(t.GetFailureCode()), turn)}
	case adminv1.Turn_STATE_UNCONFIRMED:
		return &exitError{code: 1, msg: fmt.Sprintf("%s: %s ran but its completion cannot be confirmed (it is never run again)", dash(t.GetFailureCode()), turn)}
	}
	return &exitError{code: 1, msg: fmt.Sprintf("turn_not_ended: the output of %s ended while it is %s: 'berthctl turn get %s' shows how it ends", turn, turnState(t), turn)}
}

// turnState is a Turn's state for people, with its failure code.
func turnState(t *adminv1.Turn) string {
	s := enum(t.GetState(), "STATE_")
	if t.GetFailureCode() != "" {
		s += " (" + t.GetFailureCode() + ")"
	}
	return s
}

// exitCode is a completed Turn's exit status, "-" for any other.
func exitCode(t *adminv1.Turn) string {
	if t.GetState() != adminv1.Turn_STATE_COMPLETED {
		return "-"
	}
	return fmt.Sprint(t.GetExitCode())
}

// plainArg is an argument a shell reads as itself.
var plainArg = regexp.MustCompile(`^[A-Za-z0-9_./:=@%+,-]+$`)

// command shows a Turn's command as a shell line.
func command(c *adminv1.Command) string {
	if c.GetArgv() == nil {
		return c.GetShellScript()
	}
	var parts []string
	for _, arg := range c.GetArgv().GetArgs() {
		if !plainArg.MatchString(arg) {
			arg = "'" + strings.ReplaceAll(arg, "'", `'\''`) + "'"
		}
		parts = append(parts, arg)
	}
	return strings.Join(parts, " ")
}

// oneLine fits s on one table cell of at most n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func turnFields(w io.Writer, t *adminv1.Turn) {
	field(w, "NAME", t.GetName())
	field(w, "STATE", turnState(t))
	field(w, "EXIT CODE", exitCode(t))
	if t.GetSignal() != 0 {
		field(w, "SIGNAL", fmt.Sprint(t.GetSignal()))
	}
	field(w, "COMMAND", oneLine(command(t.GetCommand()), 200))
	field(w, "WORKING DIRECTORY", dash(t.GetWorkingDirectory()))
	field(w, "TIMEOUT", dur(t.GetTimeout()))
	field(w, "QUEUE TIMEOUT", dur(t.GetQueueTimeout()))
	field(w, "STDOUT BYTES", fmt.Sprint(t.GetStdoutBytes()))
	field(w, "STDERR BYTES", fmt.Sprint(t.GetStderrBytes()))
	field(w, "OUTPUT TRUNCATED", yesno(t.GetOutputTruncated()))
	field(w, "CREATED", ts(t.GetCreateTime()))
	field(w, "STARTED", ts(t.GetStartTime()))
	field(w, "ENDED", ts(t.GetEndTime()))
	if t.GetCancelTime() != nil {
		field(w, "CANCEL REQUESTED", ts(t.GetCancelTime()))
	}
}
