package chaos

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	runtimev1 "berth.dev/proto/berth/runtime/v1"
	"berth.dev/sandbox/errgrpc/errgrpctest"
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
// with its exact output, once by its witnesses), every bad hello and bad
// request is refused, berth-core's resident memory grows by less than
// floodRSSBound, and cleanup leaves nothing (I1-I3).
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
		var hellos, requests, admitted atomic.Int64
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
				for ctx.Err() == nil {
					if badHello(ctx, gateway) {
						admitted.Add(1)
					}
					hellos.Add(1)
				}
			}()
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					for _, body := range errgrpctest.Malformed {
						err := errgrpctest.Invoke(ctx, admin, "/berth.admin.v1.SessionService/CreateSession", body)
						if status.Code(err) == codes.OK {
							admitted.Add(1)
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
		if hellos.Load() == 0 || requests.Load() == 0 {
			c.violation("flood", "the flood sent nothing (%d hellos, %d requests)", hellos.Load(), requests.Load())
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

// badHello opens a Runtime connection with an unknown device and a wrong
// credential and reports whether the gateway welcomed it.
func badHello(ctx context.Context, cc *grpc.ClientConn) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := runtimev1.NewRuntimeGatewayServiceClient(cc).Connect(ctx)
	if err != nil {
		return false
	}
	if err := st.Send(&runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_Hello{Hello: &runtimev1.Hello{
		ProtocolVersion: runtimev1.ProtocolVersion, DeviceId: uuid.NewString(),
		Credential: "not-a-credential-" + uuid.NewString(), RuntimeVersion: "flood",
	}}}); err != nil {
		return false
	}
	m, err := st.Recv()
	return err == nil && m.GetWelcome() != nil
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
