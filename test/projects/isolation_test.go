package projects

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/docker"

	"berth.dev/test/internal/stack"
)

// seen is B's state as the administrator reads it: its Session, its
// Turns and their output.
type seen struct {
	session *adminv1.Session
	turns   []*adminv1.Turn
	output  map[string]output
}

func (e *env) read(session string) seen {
	e.t.Helper()
	sessions, turns := adminv1.NewSessionServiceClient(e.cc), adminv1.NewTurnServiceClient(e.cc)
	s, err := sessions.GetSession(e.admin, &adminv1.GetSessionRequest{Name: session})
	if err != nil {
		e.t.Fatal(err)
	}
	l, err := turns.ListTurns(e.admin, &adminv1.ListTurnsRequest{Parent: session})
	if err != nil {
		e.t.Fatal(err)
	}
	r := seen{session: s.GetSession(), turns: l.GetTurns(), output: map[string]output{}}
	for _, tr := range l.GetTurns() {
		if r.output[tr.GetName()], err = e.stream(e.admin, tr.GetName()); err != nil {
			e.t.Fatal(err)
		}
	}
	return r
}

func (a seen) String() string {
	out := "Session " + prototext.Format(a.session)
	for _, tr := range a.turns {
		out += "\nTurn " + prototext.Format(tr) + fmt.Sprintf(" output %q", a.output[tr.GetName()])
	}
	return out
}

func (a seen) equal(b seen) bool {
	if !proto.Equal(a.session, b.session) || len(a.turns) != len(b.turns) || len(a.output) != len(b.output) {
		return false
	}
	for i := range a.turns {
		if !proto.Equal(a.turns[i], b.turns[i]) || a.output[a.turns[i].GetName()] != b.output[a.turns[i].GetName()] {
			return false
		}
	}
	return true
}

// TestProjectKeysIsolateProjects: two tenants' projects A and B, each with
// its own key, on one Core with two node agents. A's key is refused every
// admin API method with B's names exactly as with names of nothing (the
// sweep); it lists only A's Sessions; B's Session, Turn and output read
// back unchanged; each project's container carries its own tenant label on
// the engine; a Turn run with A's key streams its output, and revoking
// A's key ends A's open stream UNAUTHENTICATED and refuses A's next call
// while B's stream and key work on; once both Sessions are deleted the
// engine holds nothing of them; no key token or secret is in any log.
func TestProjectKeysIsolateProjects(t *testing.T) {
	start := time.Now()
	e := newEnv(t)
	t.Logf("stack up (Core, %d node agents, deployment) in %v", nodeCount, time.Since(start).Round(100*time.Millisecond))
	sessions := adminv1.NewSessionServiceClient(e.cc)
	turns := adminv1.NewTurnServiceClient(e.cc)
	a, b := e.newProject("a"), e.newProject("b")

	// Each key creates a Session in its own project, seen without node or
	// allocation.
	bRequest := uuid.NewString()
	sb, err := sessions.CreateSession(b.ctx, &adminv1.CreateSessionRequest{RequestId: bRequest, Session: &adminv1.Session{}})
	if err != nil {
		t.Fatalf("CreateSession with B's key: %v", err)
	}
	sa, err := sessions.CreateSession(a.ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}})
	if err != nil {
		t.Fatalf("CreateSession with A's key: %v", err)
	}
	for _, c := range []struct {
		s *adminv1.Session
		p project
	}{{sa.GetSession(), a}, {sb.GetSession(), b}} {
		if c.s.GetProject() != c.p.name || c.s.GetNode() != "" || c.s.GetAllocation() != "" {
			t.Fatalf("a key's Session: project %q (want %q), node %q, allocation %q", c.s.GetProject(), c.p.name, c.s.GetNode(), c.s.GetAllocation())
		}
	}
	sessA, sessB := sa.GetSession().GetName(), sb.GetSession().GetName()
	adminA, adminB := e.waitAdmitted(sessA), e.waitAdmitted(sessB)
	t.Logf("A's Session on %s, B's on %s", adminA.GetNode(), adminB.GetNode())

	// B runs a Turn with its key and streams its output.
	bTurnRequest := uuid.NewString()
	tb, err := turns.SubmitTurn(b.ctx, &adminv1.SubmitTurnRequest{Parent: sessB, RequestId: bTurnRequest, Turn: shell("echo b-out; echo b-err >&2")})
	if err != nil {
		t.Fatalf("SubmitTurn with B's key: %v", err)
	}
	if o, err := e.stream(b.ctx, tb.GetTurn().GetName()); err != nil || o != (output{"b-out\n", "b-err\n"}) {
		t.Fatalf("B's Turn streamed %q, %v", o, err)
	}
	// A runs a Turn with its key and streams its output.
	ta, err := turns.SubmitTurn(a.ctx, &adminv1.SubmitTurnRequest{Parent: sessA, RequestId: uuid.NewString(), Turn: shell("echo a-out")})
	if err != nil {
		t.Fatalf("SubmitTurn with A's key: %v", err)
	}
	if o, err := e.stream(a.ctx, ta.GetTurn().GetName()); err != nil || o != (output{"a-out\n", ""}) {
		t.Fatalf("A's Turn streamed %q, %v", o, err)
	}
	before := e.read(sessB)

	// The sweep: every method, A's key, B's names against names of
	// nothing; and within A's own Session, B's Turn id against a Turn id
	// of nothing (the Turn's lookup, past the Session's).
	theirs := names{
		session: sessB, turn: tb.GetTurn().GetName(), allocation: adminB.GetAllocation(), project: b.name,
		sessionRequest: bRequest, turnRequest: bTurnRequest,
	}
	mixed, mixedNone := randomNames(), randomNames()
	mixed.session, mixedNone.session = sessA, sessA
	mixed.turn = sessA + "/turns/" + lastSegment(tb.GetTurn().GetName())
	mixedNone.turn = sessA + "/turns/" + uuid.NewString()
	sweepStart := time.Now()
	outcomes := sweep(t, a.ctx, e.cc, []variant{
		{label: "B's names", theirs: theirs, none: randomNames()},
		{label: "B's Turn in A's own Session", theirs: mixed, none: mixedNone, turnsOnly: true},
	})
	t.Logf("sweep: %v in %v", outcomes, time.Since(sweepStart).Round(time.Millisecond))

	// A's key lists only A's Sessions: unfiltered, filtered by A, and
	// filtered by B (nothing).
	for filter, want := range map[string][]string{"": {sessA}, a.name: {sessA}, b.name: nil} {
		l, err := sessions.ListSessions(a.ctx, &adminv1.ListSessionsRequest{Project: filter, ShowDeleted: true})
		if err != nil {
			t.Fatalf("ListSessions(project=%q) with A's key: %v", filter, err)
		}
		var got []string
		for _, s := range l.GetSessions() {
			got = append(got, s.GetName())
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("ListSessions(project=%q) with A's key: %v, want %v", filter, got, want)
		}
	}
	// A request id B used is another request in A: a new Session and a
	// new Turn of A's, never B's.
	reused, err := sessions.CreateSession(a.ctx, &adminv1.CreateSessionRequest{RequestId: bRequest, Session: &adminv1.Session{}})
	if err != nil || reused.GetSession().GetName() == sessB || reused.GetSession().GetProject() != a.name {
		t.Fatalf("CreateSession with A's key and B's request id: %v, %v", reused.GetSession(), err)
	}
	if _, err := sessions.DeleteSession(a.ctx, &adminv1.DeleteSessionRequest{Name: reused.GetSession().GetName()}); err != nil {
		t.Fatalf("DeleteSession with A's key: %v", err)
	}
	rt, err := turns.SubmitTurn(a.ctx, &adminv1.SubmitTurnRequest{Parent: sessA, RequestId: bTurnRequest, Turn: shell("echo a-again")})
	if err != nil || strings.HasPrefix(rt.GetTurn().GetName(), sessB) || lastSegment(rt.GetTurn().GetName()) == lastSegment(tb.GetTurn().GetName()) {
		t.Fatalf("SubmitTurn with A's key and B's request id: %v, %v", rt.GetTurn(), err)
	}
	if o, err := e.stream(a.ctx, rt.GetTurn().GetName()); err != nil || o.stdout != "a-again\n" {
		t.Fatalf("A's second Turn streamed %q, %v", o, err)
	}

	// B is as it was.
	if after := e.read(sessB); !after.equal(before) {
		t.Errorf("B changed under A's calls:\nbefore %v\nafter  %v", before, after)
	}

	// Each project's container carries its own tenant on the engine.
	labels := map[string]string{} // allocation id -> tenant label
	cs, err := e.engine.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: stack.InstallationFilter(e.inst)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs.Items {
		if c.Labels[docker.LabelTombstone] == "" {
			labels[c.Labels[docker.LabelAllocation]] = c.Labels[docker.LabelTenant]
		}
	}
	for _, c := range []struct {
		who        string
		allocation string
		p          project
	}{{"A", adminA.GetAllocation(), a}, {"B", adminB.GetAllocation(), b}} {
		got, ok := labels[lastSegment(c.allocation)]
		if !ok || got != c.p.tenantID() {
			t.Errorf("%s's container (allocation %s): tenant label %q (present %v), want %s; engine: %v", c.who, c.allocation, got, ok, c.p.tenantID(), labels)
		}
	}
	if a.tenantID() == b.tenantID() {
		t.Fatal("the two projects share a tenant")
	}

	// Revocation: A and B each hold an open output stream of a running
	// Turn; revoking A's key ends A's UNAUTHENTICATED and refuses A's next
	// call, while B's stream and key work on.
	longA, err := turns.SubmitTurn(a.ctx, &adminv1.SubmitTurnRequest{Parent: sessA, RequestId: uuid.NewString(), Turn: shell("echo go; sleep 60")})
	if err != nil {
		t.Fatal(err)
	}
	longB, err := turns.SubmitTurn(b.ctx, &adminv1.SubmitTurnRequest{Parent: sessB, RequestId: uuid.NewString(), Turn: shell("echo go; sleep 60")})
	if err != nil {
		t.Fatal(err)
	}
	streamA, firstA := e.openStream(a.ctx, longA.GetTurn().GetName())
	streamB, firstB := e.openStream(b.ctx, longB.GetTurn().GetName())
	if firstA != "go\n" || firstB != "go\n" {
		t.Fatalf("the long Turns' first output: A %q, B %q", firstA, firstB)
	}
	revoked := time.Now()
	if _, err := adminv1.NewProjectServiceClient(e.cc).RevokeProjectKey(e.admin, &adminv1.RevokeProjectKeyRequest{Name: a.keyName}); err != nil {
		t.Fatalf("RevokeProjectKey: %v", err)
	}
	select {
	case err := <-streamA:
		lag := time.Since(revoked)
		t.Logf("A's stream ended %v after the revocation: %v", lag.Round(10*time.Millisecond), err)
		if status.Code(err) != codes.Unauthenticated || stack.AdminReason(err) != "unauthenticated" {
			t.Fatalf("A's stream ended %v, want UNAUTHENTICATED", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("A's stream still open 5 s after its key was revoked")
	}
	if _, err := sessions.GetSession(a.ctx, &adminv1.GetSessionRequest{Name: sessA}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("GetSession with the revoked key: %v, want UNAUTHENTICATED", err)
	}
	if _, err := sessions.ListSessions(a.ctx, &adminv1.ListSessionsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("ListSessions with the revoked key: %v, want UNAUTHENTICATED", err)
	}
	select {
	case err := <-streamB:
		t.Fatalf("B's stream ended with A's revocation: %v", err)
	default:
	}
	if _, err := turns.CancelTurn(b.ctx, &adminv1.CancelTurnRequest{Name: longB.GetTurn().GetName()}); err != nil {
		t.Fatalf("CancelTurn with B's key after A's revocation: %v", err)
	}
	select {
	case err := <-streamB:
		if err != nil {
			t.Fatalf("B's stream after its cancelled Turn: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("B's stream did not end after its Turn was cancelled")
	}
	if _, err := turns.CancelTurn(e.admin, &adminv1.CancelTurnRequest{Name: longA.GetTurn().GetName()}); err != nil {
		t.Fatal(err)
	}

	// Everything deleted: B's Session with B's key, A's by the operator;
	// then the engine holds nothing of them.
	if _, err := sessions.DeleteSession(b.ctx, &adminv1.DeleteSessionRequest{Name: sessB}); err != nil {
		t.Fatalf("DeleteSession with B's key: %v", err)
	}
	if _, err := sessions.DeleteSession(e.admin, &adminv1.DeleteSessionRequest{Name: sessA}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{sessA, sessB, reused.GetSession().GetName()} {
		stack.WaitFor(t, time.Minute, s+" deleted", func() bool {
			g, err := sessions.GetSession(e.admin, &adminv1.GetSessionRequest{Name: s})
			return err == nil && g.GetSession().GetState() == adminv1.Session_STATE_DELETED
		})
	}
	if c, v := stack.Owned(t, e.engine, e.inst); c+v != 0 {
		t.Errorf("the engine holds %d containers and %d volumes of the deleted Sessions", c, v)
	}

	// No key token, nor its secret, in any log.
	for who, log := range e.logs() {
		for _, p := range []project{a, b} {
			if strings.Contains(log, p.secret()) {
				t.Errorf("%s's log holds a key's secret", who)
			}
		}
		if strings.Contains(log, "berth-key-v1.") {
			t.Errorf("%s's log holds a key token's prefix", who)
		}
	}
	t.Logf("whole flow in %v", time.Since(start).Round(100*time.Millisecond))
}

// openStream opens a Turn's output stream with ctx's credentials and
// waits for its first chunk; the channel gets how the stream ended (nil
// at its end).
func (e *env) openStream(ctx context.Context, turn string) (<-chan error, string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	e.t.Cleanup(cancel)
	st, err := adminv1.NewTurnServiceClient(e.cc).StreamTurnOutput(ctx, &adminv1.StreamTurnOutputRequest{Name: turn})
	if err != nil {
		e.t.Fatalf("StreamTurnOutput: %v", err)
	}
	first, err := st.Recv()
	if err != nil {
		e.t.Fatalf("StreamTurnOutput's first chunk: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		for {
			if _, err := st.Recv(); err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				done <- err
				return
			}
		}
	}()
	return done, string(first.GetData())
}

// lastSegment is a resource name's last segment (its id).
func lastSegment(name string) string { return name[strings.LastIndex(name, "/")+1:] }
