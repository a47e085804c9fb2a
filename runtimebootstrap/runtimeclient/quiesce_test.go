package runtimeclient

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	runtimev1 "berth.dev/proto/berth/runtime/v1"
	"berth.dev/runtimebootstrap/internal/gatewaytest"
)

// wantAck fails the test unless the next message acknowledges token.
func wantAck(t *testing.T, c *gatewaytest.Conn, token string) {
	t.Helper()
	ack, rejected := c.QuiesceReply()
	if ack == nil || ack.GetSuspensionToken() != token {
		t.Fatalf("quiesce %q answered with ack %v rejected %v", token, ack, rejected)
	}
}

// wantRejected fails the test unless the next message rejects token with
// reason.
func wantRejected(t *testing.T, c *gatewaytest.Conn, token, reason string) {
	t.Helper()
	ack, rejected := c.QuiesceReply()
	if rejected == nil || rejected.GetSuspensionToken() != token || rejected.GetReason() != reason {
		t.Fatalf("quiesce %q answered with ack %v rejected %v, want %s", token, ack, rejected, reason)
	}
}

// markerHolds fails the test unless the park marker holds token (mode 0600).
func (h *harness) markerHolds(t *testing.T, token string) {
	t.Helper()
	data, err := os.ReadFile(h.park.Marker())
	if err != nil || string(data) != token {
		t.Fatalf("park marker %q, %v; want %q", data, err, token)
	}
	if info, err := os.Stat(h.park.Marker()); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("park marker mode %v, %v", info.Mode(), err)
	}
}

func (h *harness) noMarker(t *testing.T) {
	t.Helper()
	if _, err := os.Lstat(h.park.Marker()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("park marker present (%v)", err)
	}
}

// turnServed fails the test unless a Turn runs to its result on c:
// admission is open.
func turnServed(t *testing.T, c *gatewaytest.Conn, id string) {
	t.Helper()
	runTurn(c, shellTurn(id, "echo "+id))
	if r := collect(t, c, id, nil); !r.started || r.stdout.String() != id+"\n" || r.result.GetExitCode() != 0 {
		t.Fatalf("turn %s: started %v result %v stdout %q", id, r.started, r.result, r.stdout.String())
	}
}

func TestQuiesceAckFollowsTheLastOutputAndResult(t *testing.T) {
	h := start(t)
	c := h.accept(t)
	c.Welcome(true)
	runTurn(c, shellTurn("a", `head -c 204800 /dev/zero | tr '\0' a; printf err >&2`))
	if r := collect(t, c, "a", nil); r.stdout.Len() != 204800 || r.stderr.String() != "err" {
		t.Fatalf("turn a: %d stdout bytes, stderr %q", r.stdout.Len(), r.stderr.String())
	}
	c.Quiesce("token-a")
	wantAck(t, c, "token-a") // the next message: nothing was left to send
	h.markerHolds(t, "token-a")
	if !strings.Contains(h.logs.String(), `"msg":"quiesced for a planned suspension","suspension_token":"token-a"`) {
		t.Fatalf("no log line for the quiesce:\n%s", h.logs.String())
	}
}

func TestQuiesceRacingTheEndOfATurn(t *testing.T) {
	h := start(t)
	c := h.accept(t)
	c.Welcome(true)
	// Core quiesces a little after the Turn started, around its end: the
	// answer is a rejection while the Turn runs and an ack once it has
	// ended, and an ack never overtakes the Turn's output or result.
	var acks, rejections int
	for i := range 16 {
		id := "turn-" + strconv.Itoa(i)
		size := []int{1, 100000}[i%2]
		runTurn(c, shellTurn(id, "head -c "+strconv.Itoa(size)+" /dev/zero"))
		if m := c.Next(); m.GetTurnStarted() == nil {
			t.Fatalf("%s: got %v, want turn_started", id, m)
		}
		time.Sleep(time.Duration(i) * 500 * time.Microsecond)
		c.Quiesce("token-" + id)
		var output int
		var result *runtimev1.TurnResult
		acked, rejected := false, false
		for result == nil || (!acked && !rejected) {
			m := c.Next()
			switch {
			case m.GetTurnOutput() != nil:
				if result != nil || acked {
					t.Fatalf("%s: output after the result or the ack", id)
				}
				output += len(m.GetTurnOutput().GetData())
			case m.GetTurnResult() != nil:
				if acked {
					t.Fatalf("%s: result after the ack", id)
				}
				result = m.GetTurnResult()
			case m.GetQuiesceRejected() != nil:
				if m.GetQuiesceRejected().GetReason() != runtimev1.ReasonTurnRunning {
					t.Fatalf("%s: rejected %v", id, m)
				}
				rejected = true
			case m.GetQuiesceAck() != nil:
				if result == nil || output != size {
					t.Fatalf("%s: ack before the turn's result (result %v, %d of %d output bytes)", id, result, output, size)
				}
				acked = true
			default:
				t.Fatalf("%s: unexpected %v", id, m)
			}
		}
		if result.GetExitCode() != 0 || output != size {
			t.Fatalf("%s: %d output bytes, result %v", id, output, result)
		}
		if acked {
			acks++
		}
		if rejected {
			rejections++
			h.noMarker(t)
			c.Quiesce("token-" + id)
			wantAck(t, c, "token-"+id)
		}
		h.markerHolds(t, "token-"+id)
		// A new connection reopens admission for the next round.
		c.End(status.Error(codes.Unavailable, "next round"))
		c = h.accept(t)
		c.Welcome(true)
	}
	t.Logf("%d acks, %d rejections", acks, rejections)
}

func TestQuiesceWaitsForTheResultOfAnEndingTurn(t *testing.T) {
	// The quiesce arrives after the Turn's goroutine cleared the running
	// Turn and before it sent the result: the ack still follows the
	// result.
	cleared := make(chan struct{}, 1)
	testHookTurnCleared = func() {
		cleared <- struct{}{}
		time.Sleep(300 * time.Millisecond)
	}
	t.Cleanup(func() { testHookTurnCleared = nil })
	h := start(t)
	c := h.accept(t)
	c.Welcome(true)
	runTurn(c, shellTurn("a", "echo a"))
	<-cleared
	c.Quiesce("token-a")
	r := collect(t, c, "a", nil)
	if r.stdout.String() != "a\n" || r.result.GetExitCode() != 0 {
		t.Fatalf("turn a: %v %q", r.result, r.stdout.String())
	}
	wantAck(t, c, "token-a")
}

func TestQuiesceRejectedWhileTurnRuns(t *testing.T) {
	h := start(t)
	c := h.accept(t)
	c.Welcome(true)
	runTurn(c, shellTurn("a", "sleep 300 & echo $!; echo ready; wait"))
	collect(t, c, "a", readyTurn)
	c.Quiesce("token-1")
	wantRejected(t, c, "token-1", runtimev1.ReasonTurnRunning)
	h.noMarker(t)

	// The Turn goes on and admission stays open.
	c.Send(&runtimev1.ConnectResponse{Message: &runtimev1.ConnectResponse_CancelTurn{CancelTurn: &runtimev1.CancelTurn{TurnId: "a"}}})
	if r := collect(t, c, "a", nil); r.result.GetOutcome() != runtimev1.TurnResult_OUTCOME_CANCELLED {
		t.Fatalf("turn a: %v", r.result)
	}
	turnServed(t, c, "b")
	c.Quiesce("token-1")
	wantAck(t, c, "token-1")
	h.markerHolds(t, "token-1")
}

func TestQuiesceWritesTheMarkerBeforeTheAck(t *testing.T) {
	h := start(t)
	// The marker as it is the moment the ack reaches Core.
	seen := make(chan string, 4)
	h.core.OnReceive(func(m *runtimev1.ConnectRequest) {
		if m.GetQuiesceAck() != nil {
			data, err := os.ReadFile(h.park.Marker())
			if err != nil {
				seen <- "error: " + err.Error()
				return
			}
			seen <- string(data)
		}
	})
	c := h.accept(t)
	c.Welcome(true)

	// A marker that cannot be written: the path is a non-empty directory
	// (which even root cannot rename a file over).
	if err := os.MkdirAll(filepath.Join(h.park.Marker(), "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	c.Quiesce("token-1")
	wantRejected(t, c, "token-1", runtimev1.ReasonParkFailed)
	turnServed(t, c, "a") // admission stays open
	if !strings.Contains(h.logs.String(), `"msg":"refused to quiesce: the park marker could not be written"`) {
		t.Fatalf("no log line for the failed marker:\n%s", h.logs.String())
	}

	if err := os.RemoveAll(h.park.Marker()); err != nil {
		t.Fatal(err)
	}
	c.Quiesce("token-2")
	wantAck(t, c, "token-2")
	select {
	case got := <-seen:
		if got != "token-2" {
			t.Fatalf("when the ack arrived the marker held %q", got)
		}
	case <-time.After(wait):
		t.Fatal("the ack was not observed")
	}
	h.markerHolds(t, "token-2")
	// Beside the transfer journals' directory, the marker alone: no
	// temporary file of its writing is left.
	entries, _ := os.ReadDir(string(h.park))
	var names []string
	for _, e := range entries {
		if e.Name() != "transfers" {
			names = append(names, e.Name())
		}
	}
	if len(names) != 1 {
		t.Fatalf("the park directory holds %v, want the marker alone", names)
	}
}

func TestQuiesceRepeatedIsAcknowledgedAgain(t *testing.T) {
	h := start(t)
	c := h.accept(t)
	c.Welcome(true)
	c.Quiesce("token-1")
	wantAck(t, c, "token-1")
	c.Keepalive(1) // keepalives go on while quiesced
	c.Quiesce("token-1")
	wantAck(t, c, "token-1")
	h.markerHolds(t, "token-1")
	// A cancel has nothing to cancel and changes nothing.
	c.Send(&runtimev1.ConnectResponse{Message: &runtimev1.ConnectResponse_CancelTurn{CancelTurn: &runtimev1.CancelTurn{TurnId: "x"}}})
	c.Keepalive(2)
	// Another token while quiesced replaces the marker's.
	c.Quiesce("token-2")
	wantAck(t, c, "token-2")
	h.markerHolds(t, "token-2")

	// After a reconnection (admission open again, marker removed) the
	// same token is acknowledged again.
	c.End(status.Error(codes.Unavailable, "core restarting"))
	c = h.accept(t)
	c.Welcome(true)
	h.noMarker(t)
	c.Quiesce("token-2")
	wantAck(t, c, "token-2")
	h.markerHolds(t, "token-2")
}

func TestRunTurnAfterQuiesceEndsTheConnection(t *testing.T) {
	h := start(t)
	c := h.accept(t)
	c.Welcome(true)
	c.Quiesce("token-1")
	wantAck(t, c, "token-1")
	runTurn(c, shellTurn("late", "echo late"))
	if before := c.Ended(); len(before) != 0 {
		t.Fatalf("the runtime answered a run_turn after quiesce: %v", before)
	}
	if !strings.Contains(h.logs.String(), `"msg":"ending the connection: core sent a turn after quiesce","turn_id":"late"`) {
		t.Fatalf("no log line for the ended connection:\n%s", h.logs.String())
	}
	// The marker stays until the next welcome.
	h.markerHolds(t, "token-1")
	c = h.accept(t)
	c.Welcome(true)
	h.noMarker(t)
	turnServed(t, c, "next")
}

func TestReconnectionReopensAdmissionAndRemovesTheMarker(t *testing.T) {
	h := start(t)
	c := h.accept(t)
	c.Welcome(true)
	c.Quiesce("token-1")
	wantAck(t, c, "token-1")
	h.markerHolds(t, "token-1")
	c.End(status.Error(codes.Unavailable, "core restarting"))

	c = h.accept(t)
	// The marker is removed on welcome, not on hello: a Runtime Core does
	// not admit stays quiesced.
	c.Next() // hello
	h.markerHolds(t, "token-1")
	c.End(endWith(codes.Unavailable, runtimev1.ReasonNotAdmitted))

	c = h.accept(t)
	c.Welcome(true) // prepared follows the removal
	h.noMarker(t)
	if !strings.Contains(h.logs.String(), `"msg":"removed the park marker of an earlier connection"`) {
		t.Fatalf("no log line for the removed marker:\n%s", h.logs.String())
	}
	turnServed(t, c, "a")
}

func TestInvalidSuspensionTokenEndsTheConnection(t *testing.T) {
	h := start(t)
	for _, token := range []string{
		"", strings.Repeat("a", 129), "a\x00b", "tab\tbed", "line\n", "caf\u00e9", "del\x7f",
	} {
		c := h.accept(t)
		c.Welcome(true)
		c.Quiesce(token)
		if before := c.Ended(); len(before) != 0 {
			t.Fatalf("token %q: the runtime answered %v", token, before)
		}
		h.noMarker(t)
	}
	// The bounds themselves are valid.
	c := h.accept(t)
	c.Welcome(true)
	for _, token := range []string{" ", "~", strings.Repeat("z", 128), "6f1c2f5e-3a4b-4c5d-8e9f-0a1b2c3d4e5f"} {
		c.Quiesce(token)
		wantAck(t, c, token)
		h.markerHolds(t, token)
	}
}

func TestValidSuspensionToken(t *testing.T) {
	for token, want := range map[string]bool{
		"": false, "a": true, " ": true, "~": true, "\x1f": false, "\x7f": false, "\x80": false,
		strings.Repeat("a", 128): true, strings.Repeat("a", 129): false,
	} {
		if got := validSuspensionToken(token); got != want {
			t.Errorf("%q: %v, want %v", token, got, want)
		}
	}
}
