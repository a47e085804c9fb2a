package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
)

const (
	defaultAddress = "127.0.0.1:7700" // Core's default admin address
	maxMessage     = 4 << 20          // the admin server's bound on a message, used both ways
	errorDomain    = "admin.berth.dev"
	chunkBytes     = 1 << 20 // FileService's bound on one data message

	callTimeout   = 30 * time.Second // every unary call (berthctl's bound)
	fileTimeout   = 5 * time.Minute  // one whole upload or download
	pollInterval  = 500 * time.Millisecond
	streamRetries = 30 // reopenings of an output stream Core dropped, a second apart

	inputPath     = "input.txt" // where the input lands, relative to /workspace
	defaultInput  = "hello from the agent loop\n"
	defaultScript = "cat " + inputPath + "; wc -c < " + inputPath + " > result.txt"
)

// options are the command line's.
type options struct {
	address, tokenFile, project, displayName string
	input, result, shell                     string
	timeout                                  int
	waitTimeout                              time.Duration
	forks                                    int
	command                                  []string
}

// client holds the admin services the loop calls over one connection.
type client struct {
	sessions adminv1.SessionServiceClient
	turns    adminv1.TurnServiceClient
	files    adminv1.FileServiceClient
}

// failed is an error that ends the loop; its text says why.
type failed string

func (f failed) Error() string { return string(f) }

// bearer adds "authorization: Bearer <token>" to every call.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity is false: the admin API is plaintext on loopback.
func (bearer) RequireTransportSecurity() bool { return false }

// readToken returns the token held in the file at path: one line,
// surrounding white space ignored. Errors name the file, never its content.
func readToken(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	token := strings.TrimSpace(string(raw))
	if len(raw) > 4096 || token == "" || strings.ContainsFunc(token, func(r rune) bool { return r <= 0x20 || r >= 0x7f }) {
		return "", fmt.Errorf("%s does not hold one token line", path)
	}
	return token, nil
}

// dial connects to the admin API at address, which must be a loopback
// HOST:PORT: the API is plaintext (reach a remote Core through a tunnel,
// ssh -L 7700:127.0.0.1:7700 HOST).
func dial(address, token string) (*grpc.ClientConn, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("admin API address %q is not HOST:PORT", address)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, errors.New("the admin API is plaintext and listens on loopback only: reach a remote Core through a tunnel to a local port")
	}
	return grpc.NewClient(address,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearer(token)),
		grpc.WithUserAgent("berth-client-go-example"),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage)))
}

// errorReason returns the admin API's fixed reason of a failed call
// ("session_busy", "not_found", ...; the google.rpc.ErrorInfo of domain
// admin.berth.dev), or "" when the error does not carry one.
func errorReason(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == errorDomain {
			return info.GetReason()
		}
	}
	return ""
}

// waitSession reads the Session until goal(session) is true and returns it.
func (c client) waitSession(ctx context.Context, name string, timeout time.Duration, goal func(*adminv1.Session) (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		got, err := c.sessions.GetSession(cctx, &adminv1.GetSessionRequest{Name: name})
		cancel()
		if err != nil {
			return err
		}
		s := got.GetSession()
		if ok, err := goal(s); ok || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return failed(fmt.Sprintf("wait_timeout: %s is still %v after %v", name, s.GetState(), timeout))
		}
		time.Sleep(pollInterval)
	}
}

// admitted is create --wait's goal: the Runtime accepts Turns.
func admitted(s *adminv1.Session) (bool, error) {
	switch s.GetState() {
	case adminv1.Session_STATE_FAILED:
		code := s.GetEnvironment().GetFailureCode()
		if code == "" {
			code = "-"
		}
		return false, failed(fmt.Sprintf("%s: %s failed", code, s.GetName()))
	case adminv1.Session_STATE_DELETING, adminv1.Session_STATE_DELETED:
		return false, failed(fmt.Sprintf("session_deleted: %s was deleted while waiting for it", s.GetName()))
	}
	return s.GetEnvironment().GetExecutionAdmitted(), nil
}

// deleted is delete --wait's goal.
func deleted(s *adminv1.Session) (bool, error) {
	return s.GetState() == adminv1.Session_STATE_DELETED, nil
}

// uploadFile writes data as one regular file at path (relative to
// /workspace) of the Session, replacing it atomically: UploadFiles with
// FILE_FORMAT_RAW, the header first and then the bytes in chunks of at
// most 1 MiB. A retry after UNAVAILABLE needs a new request_id.
func (c client) uploadFile(ctx context.Context, session, path string, data []byte, mode uint32) (*adminv1.UploadFilesResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, fileTimeout)
	defer cancel()
	st, err := c.files.UploadFiles(ctx)
	if err != nil {
		return nil, err
	}
	header := &adminv1.UploadHeader{Name: session, RequestId: uuid.NewString(), Path: path,
		Format: adminv1.FileFormat_FILE_FORMAT_RAW, Mode: mode, Size: int64(len(data))}
	// A failed Send means the call ended: CloseAndRecv returns its status.
	if err := st.Send(&adminv1.UploadFilesRequest{Message: &adminv1.UploadFilesRequest_Header{Header: header}}); err != nil {
		return st.CloseAndRecv()
	}
	for len(data) > 0 {
		n := min(len(data), chunkBytes)
		if err := st.Send(&adminv1.UploadFilesRequest{Message: &adminv1.UploadFilesRequest_Data{Data: data[:n]}}); err != nil {
			return st.CloseAndRecv()
		}
		data = data[n:]
	}
	return st.CloseAndRecv()
}

// downloadFile returns the bytes of the regular file at path of the
// Session: DownloadFiles with FILE_FORMAT_RAW, the header first and then
// the bytes. A missing file fails with reason file_not_found.
func (c client) downloadFile(ctx context.Context, session, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, fileTimeout)
	defer cancel()
	st, err := c.files.DownloadFiles(ctx, &adminv1.DownloadFilesRequest{Name: session, Path: path,
		Format: adminv1.FileFormat_FILE_FORMAT_RAW})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	header := false
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		switch x := m.GetMessage().(type) {
		case *adminv1.DownloadFilesResponse_Header:
			header = true
		case *adminv1.DownloadFilesResponse_Data:
			out.Write(x.Data)
		}
	}
	if !header {
		return nil, failed(fmt.Sprintf("DownloadFiles of %q sent no header", path))
	}
	return out.Bytes(), nil
}

// streamOutput writes the Turn's output to stdout and stderr until the
// stream ends with the Turn. A stream Core dropped (UNAVAILABLE) is
// reopened from the offsets already written, so every byte is written
// once, in order.
func (c client) streamOutput(ctx context.Context, name string) error {
	sent := map[adminv1.OutputStream]int64{adminv1.OutputStream_OUTPUT_STREAM_STDOUT: 0, adminv1.OutputStream_OUTPUT_STREAM_STDERR: 0}
	out := map[adminv1.OutputStream]io.Writer{adminv1.OutputStream_OUTPUT_STREAM_STDOUT: os.Stdout, adminv1.OutputStream_OUTPUT_STREAM_STDERR: os.Stderr}
	for retries := 0; ; retries++ {
		err := c.streamOnce(ctx, name, sent, out, &retries) // no deadline: it lasts as long as the Turn
		if err == nil {
			return nil
		}
		if status.Code(err) != codes.Unavailable || errorReason(err) != "" || retries >= streamRetries {
			return err
		}
		time.Sleep(time.Second)
	}
}

// streamOnce reads one output stream to its end, from the offsets in sent.
func (c client) streamOnce(ctx context.Context, name string, sent map[adminv1.OutputStream]int64, out map[adminv1.OutputStream]io.Writer, retries *int) error {
	st, err := c.turns.StreamTurnOutput(ctx, &adminv1.StreamTurnOutputRequest{Name: name,
		StdoutOffset: sent[adminv1.OutputStream_OUTPUT_STREAM_STDOUT], StderrOffset: sent[adminv1.OutputStream_OUTPUT_STREAM_STDERR]})
	if err != nil {
		return err
	}
	for {
		chunk, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		*retries = 0
		at, ok := sent[chunk.GetStream()]
		if !ok {
			continue
		}
		data := chunk.GetData()[min(max(0, at-chunk.GetOffset()), int64(len(chunk.GetData()))):] // a reopened stream may repeat
		if len(data) == 0 {
			continue
		}
		sent[chunk.GetStream()] = chunk.GetOffset() + int64(len(chunk.GetData()))
		if _, err := out[chunk.GetStream()].Write(data); err != nil {
			return err
		}
	}
}

// outcome is the exit status for a terminal Turn, as berthctl's `turn run`.
func outcome(turn *adminv1.Turn) int {
	failure := turn.GetFailureCode()
	if failure == "" {
		failure = "-"
	}
	code, why := 1, ""
	switch turn.GetState() {
	case adminv1.Turn_STATE_COMPLETED:
		if e := turn.GetExitCode(); e >= 0 && e <= 255 {
			return int(e)
		}
		return 1
	case adminv1.Turn_STATE_CANCELLED:
		code, why = 130, "turn_cancelled: the Turn was cancelled"
	case adminv1.Turn_STATE_TIMED_OUT:
		code, why = 124, "turn_timed_out: the Turn ran past its timeout and was stopped"
	case adminv1.Turn_STATE_FAILED:
		why = failure + ": the Turn could not be run"
	case adminv1.Turn_STATE_UNCONFIRMED:
		why = failure + ": the Turn ran but its completion cannot be confirmed"
	default:
		why = fmt.Sprintf("turn_not_ended: the output ended while the Turn is %v", turn.GetState())
	}
	fmt.Fprintf(os.Stderr, "agent-loop: %s\n", why)
	return code
}

// downloadResult writes the file at path of the Session to stdout; a file
// the command did not write is noted on stderr.
func (c client) downloadResult(ctx context.Context, name, path string) error {
	data, err := c.downloadFile(ctx, name, path)
	if errorReason(err) == "file_not_found" {
		fmt.Fprintf(os.Stderr, "agent-loop: the command wrote no %s\n", path)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "agent-loop: downloaded %s (%d bytes)\n", path, len(data))
	_, err = os.Stdout.Write(data)
	return err
}

// runTurn submits the Turn, streams its output (Ctrl-C cancels it) and
// returns it as it ended.
func (c client) runTurn(ctx context.Context, name string, o options) (*adminv1.Turn, error) {
	command := &adminv1.Command{Program: &adminv1.Command_Argv{Argv: &adminv1.Argv{Args: o.command}}} // no shell, PATH lookup
	if o.shell != "" || len(o.command) == 0 {
		script := o.shell
		if script == "" {
			script = defaultScript
		}
		command = &adminv1.Command{Program: &adminv1.Command_ShellScript{ShellScript: script}} // /bin/sh -c
	}
	turn := &adminv1.Turn{Command: command}
	if o.timeout > 0 {
		turn.Timeout = durationpb.New(time.Duration(o.timeout) * time.Second)
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	submitted, err := c.turns.SubmitTurn(cctx, &adminv1.SubmitTurnRequest{Parent: name, RequestId: uuid.NewString(), Turn: turn})
	cancel()
	if err != nil {
		return nil, err
	}
	turnName := submitted.GetTurn().GetName()

	interrupt := make(chan os.Signal, 1)
	signal.Notify(interrupt, os.Interrupt)
	defer func() { signal.Stop(interrupt); close(interrupt) }()
	go func() {
		if _, ok := <-interrupt; ok {
			fmt.Fprintf(os.Stderr, "agent-loop: cancelling %s\n", turnName)
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			defer cancel()
			if _, err := c.turns.CancelTurn(cctx, &adminv1.CancelTurnRequest{Name: turnName}); err != nil {
				fmt.Fprintf(os.Stderr, "agent-loop: CancelTurn: %v\n", err)
			}
		}
	}()
	if err := c.streamOutput(ctx, turnName); err != nil {
		return nil, err
	}
	cctx, cancel = context.WithTimeout(ctx, callTimeout)
	defer cancel()
	ended, err := c.turns.GetTurn(cctx, &adminv1.GetTurnRequest{Name: turnName})
	return ended.GetTurn(), err
}

// run is the loop; it returns the exit status.
func (c client) run(ctx context.Context, o options) (code int, err error) {
	// 1. Create the Session. request_id makes a retry of this call idempotent.
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	created, err := c.sessions.CreateSession(cctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(),
		Session: &adminv1.Session{DisplayName: o.displayName, Project: o.project}})
	cancel()
	if err != nil {
		return 1, err
	}
	name := created.GetSession().GetName()
	fmt.Fprintf(os.Stderr, "agent-loop: created %s\n", name)
	defer func() {
		// 7. Delete the Session and wait until its cleanup is confirmed.
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, derr := c.sessions.DeleteSession(cctx, &adminv1.DeleteSessionRequest{Name: name})
		cancel()
		if derr == nil {
			derr = c.waitSession(ctx, name, o.waitTimeout, deleted)
		}
		if derr == nil {
			fmt.Fprintf(os.Stderr, "agent-loop: deleted %s\n", name)
		}
		if err == nil && derr != nil {
			code, err = 1, derr
		}
	}()

	// 2. Wait until its Runtime accepts Turns.
	if err := c.waitSession(ctx, name, o.waitTimeout, admitted); err != nil {
		return 1, err
	}
	fmt.Fprintf(os.Stderr, "agent-loop: %s admits Turns\n", name)

	// 3. Upload the agent's input as one file (FILE_FORMAT_RAW), in chunks
	// of at most 1 MiB; FILE_FORMAT_TAR sends a whole tree the same way.
	up, err := c.uploadFile(ctx, name, inputPath, []byte(o.input), 0o644)
	if err != nil {
		return 1, err
	}
	fmt.Fprintf(os.Stderr, "agent-loop: uploaded %s (%d bytes)\n", inputPath, up.GetBytes())

	// 4. Run one Turn (in /workspace) and stream its output.
	ended, err := c.runTurn(ctx, name, o)
	if err != nil {
		return 1, err
	}

	// 5. Download what the command wrote (FILE_FORMAT_RAW).
	if ended.GetState() == adminv1.Turn_STATE_COMPLETED && o.result != "" {
		if err := c.downloadResult(ctx, name, o.result); err != nil {
			return 1, err
		}
	}

	// 6. Fork: branches that start from this workspace, each with its own
	// sandbox; their work never touches the Session's or each other's.
	if ended.GetState() == adminv1.Turn_STATE_COMPLETED && o.forks > 0 {
		if err := c.forkBranches(ctx, name, o); err != nil {
			return 1, err
		}
	}
	return outcome(ended), nil
}

// forkBranches forks the Session into o.forks branches, runs one Turn in
// each and downloads what it wrote, then deletes the branches.
func (c client) forkBranches(ctx context.Context, name string, o options) (err error) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	forked, err := c.sessions.ForkSession(cctx, &adminv1.ForkSessionRequest{Name: name, RequestId: uuid.NewString(),
		Count: int32(o.forks), MinCount: int32(o.forks), DisplayNamePrefix: o.displayName + "-branch"})
	cancel()
	if err != nil {
		return err
	}
	var branches []string
	for _, child := range forked.GetChildren() {
		branches = append(branches, child.GetName())
	}
	fmt.Fprintf(os.Stderr, "agent-loop: forked %s into %d branches\n", name, len(branches))
	defer func() {
		for _, b := range branches {
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			_, derr := c.sessions.DeleteSession(cctx, &adminv1.DeleteSessionRequest{Name: b})
			cancel()
			err = errors.Join(err, derr)
		}
		for _, b := range branches {
			err = errors.Join(err, c.waitSession(ctx, b, o.waitTimeout, deleted))
		}
	}()
	for i, b := range branches {
		if err := c.waitSession(ctx, b, o.waitTimeout, admitted); err != nil {
			return err
		}
		script := fmt.Sprintf(`printf 'branch-%d %%d\n' "$(wc -c < result.txt)" > branch.txt`, i)
		bo := options{shell: script}
		if _, err := c.runTurn(ctx, b, bo); err != nil {
			return err
		}
		data, err := c.downloadFile(ctx, b, "branch.txt")
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "agent-loop: branch %d: %s\n", i, strings.TrimSpace(string(data)))
	}
	return nil
}

func main() {
	os.Exit(mainCode())
}

// parseOptions reads the command line, with the environment's defaults.
func parseOptions() options {
	var o options
	env := func(key, def string) string {
		if v := os.Getenv(key); v != "" {
			return v
		}
		return def
	}
	flag.StringVar(&o.address, "address", env("BERTH_ADMIN_ADDRESS", defaultAddress), "the admin API's loopback HOST:PORT")
	flag.StringVar(&o.tokenFile, "token-file", os.Getenv("BERTH_ADMIN_TOKEN_FILE"), "the admin-token file (default $BERTH_ADMIN_TOKEN_FILE; else $BERTH_ADMIN_TOKEN holds the token)")
	flag.StringVar(&o.project, "project", "", "tenants/TENANT/projects/PROJECT (default: the default project)")
	flag.StringVar(&o.displayName, "display-name", "agent-loop-example", "the Session's display name")
	flag.StringVar(&o.input, "input", defaultInput, "the content of /workspace/"+inputPath)
	flag.StringVar(&o.result, "result", "result.txt", "the file to download after the command, relative to /workspace ('' skips it)")
	flag.StringVar(&o.shell, "shell", "", "run this script with /bin/sh -c instead of the command")
	flag.IntVar(&o.timeout, "timeout", 0, "stop the command after this many seconds (default: Core's)")
	flag.DurationVar(&o.waitTimeout, "wait-timeout", 300*time.Second, "how long to wait for the Session")
	flag.IntVar(&o.forks, "forks", 2, "branches to fork after the command (0: none)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: agentloop [flags] [--] [command [arg...]] (default command: /bin/sh -c '%s')\n", defaultScript)
		flag.PrintDefaults()
	}
	flag.Parse()
	o.command = flag.Args()
	return o
}

// mainCode runs the loop and returns the exit status.
func mainCode() int {
	o := parseOptions()
	token := os.Getenv("BERTH_ADMIN_TOKEN")
	if o.tokenFile != "" {
		t, err := readToken(o.tokenFile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "agent-loop: error: %v\n", err)
			return 1
		}
		token = t
	}
	if token == "" {
		fmt.Fprintln(os.Stderr, "agent-loop: give --token-file, $BERTH_ADMIN_TOKEN_FILE or $BERTH_ADMIN_TOKEN")
		return 2
	}
	conn, err := dial(o.address, token)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent-loop: error: %v\n", err)
		return 1
	}
	defer func() { _ = conn.Close() }()
	c := client{sessions: adminv1.NewSessionServiceClient(conn), turns: adminv1.NewTurnServiceClient(conn), files: adminv1.NewFileServiceClient(conn)}
	code, err := c.run(context.Background(), o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent-loop: error: %s\n", describe(err))
		return 1
	}
	return code
}

// describe is an error as the Python and TypeScript examples print it: a
// call's reason (the admin API's, else its code in snake case) and message.
func describe(err error) string {
	var f failed
	st, ok := status.FromError(err)
	if !ok || errors.As(err, &f) {
		return err.Error()
	}
	reason := errorReason(err)
	if reason == "" {
		for i, r := range st.Code().String() { // "DeadlineExceeded" -> "deadline_exceeded"
			if i > 0 && r >= 'A' && r <= 'Z' {
				reason += "_"
			}
			reason += strings.ToLower(string(r))
		}
	}
	return reason + ": " + st.Message()
}
