package turns_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/projects"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/core/turns"
	"berth.dev/core/turns/turnstest"
	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox/errdefs"
)

func script(s string) turns.Command { return turns.Command{Script: &s} }

func TestValidateNamesTheField(t *testing.T) {
	ok := func() turns.SubmitRequest {
		return turns.SubmitRequest{SessionID: uuid.New(), RequestID: uuid.New(), Command: script("true")}
	}
	for _, tc := range []struct {
		field string
		edit  func(*turns.SubmitRequest)
	}{
		{"session_id", func(r *turns.SubmitRequest) { r.SessionID = uuid.Nil }},
		{"request_id", func(r *turns.SubmitRequest) { r.RequestID = uuid.Nil }},
		{"command", func(r *turns.SubmitRequest) { r.Command = turns.Command{} }},
		{"command", func(r *turns.SubmitRequest) { r.Command.Argv = []string{"x"} }},
		{"command.argv", func(r *turns.SubmitRequest) { r.Command = turns.Command{Argv: []string{}} }},
		{"command.argv", func(r *turns.SubmitRequest) { r.Command = turns.Command{Argv: []string{""}} }},
		{"command.argv", func(r *turns.SubmitRequest) { r.Command = turns.Command{Argv: []string{"a", "b\x00"}} }},
		{"command.script", func(r *turns.SubmitRequest) { r.Command = script("") }},
		{"command.script", func(r *turns.SubmitRequest) { r.Command = script("\xff") }},
		{"command.script", func(r *turns.SubmitRequest) {
			r.Command = script(strings.Repeat("x", turns.MaxScriptBytes+1))
		}},
		{"working_directory", func(r *turns.SubmitRequest) { r.WorkingDirectory = "/etc" }},
		{"working_directory", func(r *turns.SubmitRequest) { r.WorkingDirectory = "/workspace/../etc" }},
		{"working_directory", func(r *turns.SubmitRequest) { r.WorkingDirectory = "workspace" }},
		{"working_directory", func(r *turns.SubmitRequest) { r.WorkingDirectory = "/workspacex" }},
		{"env", func(r *turns.SubmitRequest) { r.Env = map[string]string{"BERTH_X": "1"} }},
		{"env", func(r *turns.SubmitRequest) { r.Env = map[string]string{"berth_x": "1"} }},
		{"env", func(r *turns.SubmitRequest) { r.Env = map[string]string{"1X": "1"} }},
		{"env", func(r *turns.SubmitRequest) { r.Env = map[string]string{"X=Y": "1"} }},
		{"env", func(r *turns.SubmitRequest) { r.Env = map[string]string{"X": "a\x00b"} }},
		{"stdin", func(r *turns.SubmitRequest) { r.Stdin = make([]byte, turns.MaxStdinBytes+1) }},
		{"timeout", func(r *turns.SubmitRequest) { r.Timeout = time.Millisecond }},
		{"timeout", func(r *turns.SubmitRequest) { r.Timeout = 25 * time.Hour }},
		{"queue_timeout", func(r *turns.SubmitRequest) { r.QueueTimeout = 2 * time.Hour }},
	} {
		r := ok()
		tc.edit(&r)
		var fe *errdefs.FieldError
		if err := r.Validate(); !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: %v", tc.field, err)
		}
	}
	r := ok()
	r.WorkingDirectory = "/workspace/sub/dir"
	r.Env = map[string]string{"PATH_EXTRA": "x", "_U": ""}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if r.Timeout != turns.DefaultTimeout || r.QueueTimeout != turns.DefaultQueueTimeout {
		t.Fatalf("defaults %v %v", r.Timeout, r.QueueTimeout)
	}
}

func TestSubmitSealsInputAndRetriesAreIdempotent(t *testing.T) {
	f := turnstest.New(t)
	svc, st, b := f.Svc, f.St, f.Session
	ctx := context.Background()
	req := turns.SubmitRequest{
		SessionID: b.Session.ID, RequestID: uuid.New(), Command: script("printenv TOKEN"),
		Env: map[string]string{"TOKEN": "very-secret-value"}, Stdin: []byte("secret stdin"),
	}
	first, err := svc.Submit(ctx, projects.All(), req)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing of the secret input is stored in the clear, not even a
	// plain hash of it.
	var row []byte
	if err := st.Pool().QueryRow(ctx, "SELECT convert_to(t::text, 'UTF8') FROM turns t WHERE id = $1", first.ID).Scan(&row); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(row, []byte("very-secret-value")) || bytes.Contains(row, []byte("secret stdin")) {
		t.Fatal("the turn row carries its secret input in the clear")
	}
	in, err := svc.OpenInput(first)
	if err != nil || in.Env["TOKEN"] != "very-secret-value" || string(in.Stdin) != "secret stdin" {
		t.Fatalf("opened input %v, %v", in.Env, err)
	}
	again, err := svc.Submit(ctx, projects.All(), req)
	if err != nil || again.ID != first.ID {
		t.Fatalf("retry: %v %v", again.ID, err)
	}
	changed := req
	changed.Env = map[string]string{"TOKEN": "other"}
	if _, err := svc.Submit(ctx, projects.All(), changed); !errdefs.IsExists(err) {
		t.Fatalf("same request id, other input: %v, want ErrExists", err)
	}
	// Another Session cannot read it.
	if _, err := svc.Get(ctx, projects.All(), uuid.New(), first.ID); !errdefs.IsNotFound(err) {
		t.Fatalf("get through another session: %v", err)
	}
}

func TestStreamOutputFromOffsetsUntilTerminal(t *testing.T) {
	f := turnstest.New(t)
	svc, st, b := f.Svc, f.St, f.Session
	ctx := context.Background()
	turn, err := svc.Submit(ctx, projects.All(), turns.SubmitRequest{SessionID: b.Session.ID, RequestID: uuid.New(), Command: script("x")})
	if err != nil {
		t.Fatal(err)
	}
	g, err := st.AcceptRuntime(ctx, store.AcceptRuntimeParams{ConnectionID: uuid.New(), DeviceID: b.Allocation.DeviceID,
		Credential: runtimebootstrap.NewSecret(string(credentialOf(t, st, b)))})
	if err != nil {
		t.Fatal(err)
	}
	conn := g.Conn
	if _, err := st.MarkRuntimePrepared(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := svc.Claim(ctx, conn); !ok || err != nil {
		t.Fatalf("claim %v %v", ok, err)
	}
	if err := svc.Output(ctx, turn.ID, conn, store.StreamStdout, 0, []byte("hello ")); err != nil {
		t.Fatal(err)
	}

	// A reader from stdout offset 3 sees "lo " now, then the rest as it
	// arrives, and ends when the Turn is terminal.
	got := make(chan string, 1)
	go func() {
		var out bytes.Buffer
		stdout := int64(3)
		err := svc.StreamOutput(ctx, projects.All(), b.Session.ID, turn.ID, 3, 1, func(c turns.Chunk) error {
			if c.Stream == store.StreamStdout {
				if c.Offset != stdout {
					t.Errorf("chunk offset %d, want %d", c.Offset, stdout)
				}
				stdout += int64(len(c.Data))
				out.Write(c.Data)
			} else {
				out.WriteString("[" + string(c.Data) + "]")
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
		got <- out.String()
	}()
	time.Sleep(100 * time.Millisecond)
	if err := svc.Output(ctx, turn.ID, conn, store.StreamStderr, 0, []byte("ab")); err != nil {
		t.Fatal(err)
	}
	if err := svc.Output(ctx, turn.ID, conn, store.StreamStdout, 6, []byte("world")); err != nil {
		t.Fatal(err)
	}
	code := int32(0)
	// Finish wakes the reader: no notification by hand.
	if _, err := svc.Finish(ctx, turn.ID, conn, store.TurnResult{State: store.TurnCompleted, ExitCode: &code, StdoutBytes: 11, StderrBytes: 2}); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != "lo [b]world" {
			t.Fatalf("streamed %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end after the turn finished")
	}
}

// credentialOf cannot read a credential back (only its digest is kept), so
// the fixture's RunningSession credential is re-derived by accepting with
// it; here we replace the digest with one of a known credential.
func credentialOf(t *testing.T, st *storetest.Owned, b store.SessionBundle) []byte {
	t.Helper()
	cred := []byte("known-credential-for-this-test-0123456789")
	if _, err := st.Pool().Exec(context.Background(), "UPDATE allocations SET credential_digest = sha256($1) WHERE id = $2", cred, b.Allocation.ID); err != nil {
		t.Fatal(err)
	}
	return cred
}

// TestConcurrentIdenticalSubmitsAllGetOneTurn: fifty identical submissions
// at once (one request id, one body) are one request and its retries:
// every call succeeds with the same Turn, and exactly one Turn exists.
// Another body under that request id is still refused.
func TestConcurrentIdenticalSubmitsAllGetOneTurn(t *testing.T) {
	f := turnstest.New(t)
	svc, st := f.Svc, f.St
	ctx := context.Background()
	req := turns.SubmitRequest{SessionID: f.Session.Session.ID, RequestID: uuid.New(), Command: script("echo once"), Stdin: []byte("in")}
	const callers = 50
	got := make([]store.Turn, callers)
	errs := make([]error, callers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			<-start
			got[i], errs[i] = svc.Submit(ctx, projects.All(), req)
		})
	}
	close(start)
	wg.Wait()
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if got[i].ID != got[0].ID {
			t.Fatalf("caller %d got Turn %s, caller 0 %s", i, got[i].ID, got[0].ID)
		}
	}
	var n int
	if err := st.Pool().QueryRow(ctx, "SELECT count(*) FROM turns WHERE request_id = $1", req.RequestID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%d Turns for one request id, want 1", n)
	}
	changed := req
	changed.Stdin = []byte("other")
	if _, err := svc.Submit(ctx, projects.All(), changed); !errdefs.IsExists(err) {
		t.Fatalf("same request id, other body: %v, want ErrExists", err)
	}
}
