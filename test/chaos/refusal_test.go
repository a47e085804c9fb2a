package chaos

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"berth.dev/platform/errgrpc/errgrpctest"
	adminv1 "berth.dev/proto/berth/admin/v1"
	runtimev1 "berth.dev/proto/berth/runtime/v1"
)

// refusal is what a refused call carried: its gRPC code and the domain
// and reason of its google.rpc.ErrorInfo (empty without one). A scenario
// names the exact set it accepts, so a refusal of another code, or one
// without Berth's fixed reason (native text, an Unknown, a reason-less
// Unavailable), fails it.
type refusal struct {
	code           codes.Code
	domain, reason string
}

func (r refusal) String() string {
	if r.domain == "" {
		return r.code.String() + " (no ErrorInfo)"
	}
	return fmt.Sprintf("%s %s/%s", r.code, r.domain, r.reason)
}

// refusalOf reads err's code and ErrorInfo from its status details.
func refusalOf(err error) refusal {
	info := errgrpctest.Info(err)
	return refusal{code: status.Code(err), domain: info.GetDomain(), reason: info.GetReason()}
}

// adminRefusal is an admin API refusal (adminv1.ErrorDomain).
func adminRefusal(code codes.Code, reason string) refusal {
	return refusal{code: code, domain: adminv1.ErrorDomain, reason: reason}
}

// The refusals the scenarios accept, each with where Berth produces it.
var (
	// refusedDatabaseUnavailable: a store call met PostgreSQL down, out
	// of connection slots or starting up (core/store/pgerr classifies
	// connection failures, SQLSTATE classes 08, 53, 57P0x as
	// database_unavailable; the admin codec sends it as UNAVAILABLE).
	refusedDatabaseUnavailable = adminRefusal(codes.Unavailable, "database_unavailable")
	// refusedNoCapacity: placement found no enabled, present, ready node
	// with room (core/store ErrNoCapacity).
	refusedNoCapacity = adminRefusal(codes.FailedPrecondition, "no_ready_node_with_capacity")
	// refusedUnauthenticated: an admin call without the bearer token,
	// refused from its headers (core/admin's tap).
	refusedUnauthenticated = adminRefusal(codes.Unauthenticated, "unauthenticated")
	// refusedCredential: a Runtime hello with an unknown device or a wrong
	// credential (core/gateway's codec).
	refusedCredential = refusal{code: codes.Unauthenticated, domain: runtimev1.ErrorDomain, reason: runtimev1.ReasonCredentialRejected}
	// refusedCoreGone: the transport's own answer while no berth-core
	// listens (it exited on a lost execution lease): UNAVAILABLE without
	// an ErrorInfo. Accepted only while Core has exited.
	refusedCoreGone = refusal{code: codes.Unavailable}
)

// refusals tallies the refusals a scenario saw, by refusal, with one
// message of each for the report. Safe for concurrent use (the flood's
// goroutines share one).
type refusals struct {
	mu      sync.Mutex
	seen    map[refusal]int
	message map[refusal]string
}

// add records err's refusal.
func (r *refusals) add(err error) {
	got := refusalOf(err)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen, r.message = map[refusal]int{}, map[refusal]string{}
	}
	r.seen[got]++
	r.message[got] = status.Convert(err).Message()
}

// total is how many refusals were recorded.
func (r *refusals) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, k := range r.seen {
		n += k
	}
	return n
}

// String lists the refusals seen and their counts.
func (r *refusals) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for k, n := range r.seen {
		out = append(out, fmt.Sprintf("%v x%d", k, n))
	}
	slices.Sort(out)
	return "[" + strings.Join(out, ", ") + "]"
}

// requireRefusals records a "refusal" violation for each kind of refusal
// in r that is not exactly (code, domain and reason) one of want; what
// names the calls.
func (c *cluster) requireRefusals(what string, r *refusals, want ...refusal) {
	c.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, len(want))
	for i, w := range want {
		names[i] = w.String()
	}
	for got, n := range r.seen {
		if !slices.Contains(want, got) {
			c.violation("refusal", "%s: %d refused with %v (%q), want only [%s]", what, n, got, r.message[got], strings.Join(names, ", "))
		}
	}
}
