package chaos

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"berth.dev/platform/errgrpc/errgrpctest"
	runtimev1 "berth.dev/proto/berth/runtime/v1"
	"berth.dev/test/internal/benchstat"
)

// floodRSSBound is how much berth-core's resident memory may grow during
// TestFloodDuringWork: the servers bound each request (4 MiB admin
// messages, 16 KiB headers, 1 MiB Runtime messages) and refuse the
// unauthenticated ones before reading their bodies.
const floodRSSBound = 256 << 20

// TestFloodDuringWork floods berth-core for a seeded 5-10 s, from eight
// goroutines, with Runtime hellos carrying unknown device credentials and
// unauthenticated malformed admin requests, while real work goes on:
// Sessions are created and Turns run in every Session. Nothing that
// should pass is refused (every create accepted, every Turn completed
// with its exact output, once by its witnesses); every bad hello is
// refused exactly UNAUTHENTICATED runtime_credential_rejected (the
// Runtime gateway's codec, core/gateway) and every bad request exactly
// UNAUTHENTICATED unauthenticated (the admin server's tap, from the
// headers, core/admin), at least one of each; a call the flood's end cut
// off has no outcome and is not counted. berth-core's resident memory
// grows by less than floodRSSBound, and cleanup leaves nothing (I1-I3).
func TestFloodDuringWork(t *testing.T) {
	scenario(t, "bad hellos and malformed admin requests flood Core during work", func(t *testing.T, r *run) {
		c := newCluster(t, r, options{proxied: -1, turns: true})
		sessions := c.mustCreate(3)
		requireOutcomes(t, c, sessions, activeDeadline)
		before := coreRSS(t, c)

		hold := time.Duration(5000+r.rng.IntN(5000)) * time.Millisecond
		r.fault(t, "flood: bad Runtime hellos and unauthenticated malformed admin requests for %v", hold)
		ctx, stop := context.WithTimeout(context.Background(), hold)
		defer stop()
		// over reports that the flood's end cut a call off: its deadline
		// has passed. ctx.Err alone is not enough: gRPC fails a call whose
		// deadline has passed at once (DEADLINE_EXCEEDED, no ErrorInfo),
		// while the context's own timer, on a loaded machine, may mark it
		// done only milliseconds later, in which a tight loop makes
		// hundreds of calls.
		end, _ := ctx.Deadline()
		over := func() bool { return ctx.Err() != nil || !time.Now().Before(end) }
		var hellos, requests, admitted atomic.Int64
		var helloRefusals, requestRefusals refusals
		var wg sync.WaitGroup
		gateway, err := grpc.NewClient(c.coreOpts.RuntimeListen, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer gateway.Close()
		admin, err := grpc.NewClient(c.core.AdminAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()
		for range 4 {
			wg.Add(2)
			go func() {
				defer wg.Done()
				for !over() {
					err := badHello(ctx, gateway)
					switch {
					case over(): // cut off by the flood's end
					case err == nil:
						admitted.Add(1)
					default:
						helloRefusals.add(err)
					}
					hellos.Add(1)
				}
			}()
			go func() {
				defer wg.Done()
				for !over() {
					for _, body := range errgrpctest.Malformed {
						err := errgrpctest.Invoke(ctx, admin, "/berth.admin.v1.SessionService/CreateSession", body)
						switch {
						case over():
						case err == nil:
							admitted.Add(1)
						default:
							requestRefusals.add(err)
						}
						requests.Add(1)
					}
				}
			}()
		}

		// The real work, during the flood.
		created, err := c.createSession()
		if err != nil {
			c.violation("refusal", "CreateSession refused during the flood: %v", err)
		} else {
			sessions = append(sessions, created)
		}
		var list []submitted
		for _, s := range sessions[:3] {
			sub, err := c.submitTurn(s)
			if err != nil {
				c.violation("refusal", "SubmitTurn refused during the flood: %v", err)
				continue
			}
			list = append(list, sub)
		}
		<-ctx.Done()
		wg.Wait()
		after := coreRSS(t, c)
		t.Logf("flood: %d bad hellos, %d malformed admin requests; berth-core RSS %d MiB before, %d MiB after",
			hellos.Load(), requests.Load(), before>>20, after>>20)
		if n := admitted.Load(); n > 0 {
			c.violation("security", "%d bad hellos or unauthenticated requests were accepted", n)
		}
		t.Logf("flood refusals: hellos %v, admin requests %v", &helloRefusals, &requestRefusals)
		c.requireRefusals("a bad hello", &helloRefusals, refusedCredential)
		c.requireRefusals("an unauthenticated malformed admin request", &requestRefusals, refusedUnauthenticated)
		if helloRefusals.total() == 0 || requestRefusals.total() == 0 {
			c.violation("flood", "the flood had nothing refused (%d of %d hellos, %d of %d requests)",
				helloRefusals.total(), hellos.Load(), requestRefusals.total(), requests.Load())
		}
		if after-before > floodRSSBound {
			c.violation("memory", "berth-core grew by %d MiB during the flood, more than %d MiB", (after-before)>>20, floodRSSBound>>20)
		}

		var tally turnTally
		c.checkTurns(list, &tally, true)
		if tally.completed != len(list) {
			c.violation("I4", "%d of %d Turns submitted during the flood completed", tally.completed, len(list))
		}
		requireOutcomes(t, c, sessions, activeDeadline)
		c.checkWitness(list)
		c.invariants()
	})
}

// errWelcomedNothing is a gateway answer to a hello that is neither a
// welcome nor a refusal.
var errWelcomedNothing = errors.New("the gateway answered the hello with neither a welcome nor a refusal")

// badHello opens a Runtime connection with an unknown device and a wrong
// credential and returns the gateway's refusal, nil when it welcomed the
// Runtime. The stream ends with ctx.
func badHello(ctx context.Context, cc *grpc.ClientConn) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := runtimev1.NewRuntimeGatewayServiceClient(cc).Connect(ctx)
	if err != nil {
		return err
	}
	// A failed Send ends the stream: its status is Recv's.
	_ = st.Send(&runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_Hello{Hello: &runtimev1.Hello{
		ProtocolVersion: runtimev1.ProtocolVersion, DeviceId: uuid.NewString(),
		Credential: "not-a-credential-" + uuid.NewString(), RuntimeVersion: "flood",
	}}})
	m, err := st.Recv()
	switch {
	case err != nil:
		return err
	case m.GetWelcome() == nil:
		return errWelcomedNothing
	}
	return nil
}

// coreRSS reads berth-core's resident set size in bytes.
func coreRSS(t *testing.T, c *cluster) int64 {
	t.Helper()
	kb, err := benchstat.ProcStatus(c.core.Cmd.Process.Pid, "VmRSS")
	if err != nil {
		t.Fatalf("berth-core's VmRSS: %v", err)
	}
	return kb << 10
}
