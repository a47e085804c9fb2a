package nodeproto

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/store"

	"berth.dev/test/internal/stack"
)

// TestSessionDeletedWhileCreatingIsReleased is issue 12's bug, seen by a
// user on a healthy system, with the real binaries and the real engine: a
// Session deleted 0, 0.5, 1 and 2 s after its creation (racing its Create)
// ends DELETED, its allocation RELEASED with its creation settled (read
// from the database), and the engine holds no container or volume of the
// installation (read from the engine). Each next CreateSession on the
// single node, whose max_active is 1, succeeds: no slot is held for ever.
func TestSessionDeletedWhileCreatingIsReleased(t *testing.T) {
	cl := stack.OneNodeCluster(t, &adminv1.Specification{CpuMillis: 100, MemoryBytes: 128 << 20, DiskBytes: 1 << 30, MaxActive: 1, MaxRetained: 1},
		stack.CoreOptions{}, stack.NodeOptions{})
	c, cc, ctx, inst, cli := cl.Core, cl.CC, cl.Ctx, cl.Installation, cl.Engine
	st := c.Store(t)
	sessionsAPI := adminv1.NewSessionServiceClient(cc)

	create := func() (string, uuid.UUID) {
		t.Helper()
		resp, err := sessionsAPI.CreateSession(ctx, &adminv1.CreateSessionRequest{
			RequestId: uuid.NewString(), Session: &adminv1.Session{DisplayName: "racing"},
		})
		if err != nil {
			t.Fatalf("CreateSession on the max_active 1 node: %v", err)
		}
		name := resp.GetSession().GetName()
		return name, uuid.MustParse(strings.TrimPrefix(name, "sessions/"))
	}
	// allocationsOf reads the Session's allocations from the database,
	// released ones included.
	allocationsOf := func(session uuid.UUID) []store.Allocation {
		t.Helper()
		page, err := st.ListAllocationsByAge(context.Background(), store.MaxPageSize, store.AgeCursor{}, true)
		if err != nil {
			t.Fatal(err)
		}
		var out []store.Allocation
		for _, a := range page {
			if a.SessionID == session {
				out = append(out, a.Allocation)
			}
		}
		return out
	}
	// waitDeleted waits until the Session is DELETED, every allocation of
	// it RELEASED with settled creation, and the engine holds nothing of
	// the installation.
	waitDeleted := func(name string, id uuid.UUID) []store.Allocation {
		t.Helper()
		var allocs []store.Allocation
		stack.WaitFor(t, 90*time.Second, name+" DELETED, its allocation RELEASED and the engine empty", func() bool {
			got, err := sessionsAPI.GetSession(ctx, &adminv1.GetSessionRequest{Name: name})
			if err != nil {
				t.Fatalf("GetSession: %v", err)
			}
			allocs = allocationsOf(id)
			released := len(allocs) > 0
			for _, a := range allocs {
				released = released && a.State == store.AllocationReleased && a.CreationSettled()
			}
			containers, volumes := stack.Owned(t, cli, inst)
			return got.GetSession().GetState() == adminv1.Session_STATE_DELETED && released && containers+volumes == 0
		})
		return allocs
	}

	for _, delay := range []time.Duration{0, 500 * time.Millisecond, time.Second, 2 * time.Second} {
		name, id := create()
		time.Sleep(delay)
		if _, err := sessionsAPI.DeleteSession(ctx, &adminv1.DeleteSessionRequest{Name: name}); err != nil {
			t.Fatalf("DeleteSession %v after creation: %v", delay, err)
		}
		start := time.Now()
		for _, a := range waitDeleted(name, id) {
			t.Logf("deleted %v after creation: released in %v; Create sent %v, settled running %v, absent %v",
				delay, time.Since(start).Round(10*time.Millisecond), a.CreateDispatchedAt != nil, a.CreateSettled, a.AbsenceReceipt)
		}
	}

	// The node's slot serves a Session to the end: its allocation becomes
	// active, and its deletion leaves nothing.
	name, id := create()
	allocations := adminv1.NewAllocationServiceClient(cc)
	stack.WaitFor(t, 90*time.Second, "the next Session's allocation ACTIVE", func() bool {
		resp, err := allocations.ListAllocations(ctx, &adminv1.ListAllocationsRequest{PageSize: 100})
		if err != nil {
			t.Fatalf("ListAllocations: %v", err)
		}
		for _, a := range resp.GetAllocations() {
			if a.GetSession() == name && a.GetState() == adminv1.Allocation_STATE_ACTIVE && a.GetCreateSettled() {
				return true
			}
		}
		return false
	})
	if containers, volumes := stack.Owned(t, cli, inst); containers != 1 || volumes != 2 {
		t.Fatalf("the engine holds %d containers and %d volumes, want 1 and 2", containers, volumes)
	}
	if _, err := sessionsAPI.DeleteSession(ctx, &adminv1.DeleteSessionRequest{Name: name}); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	waitDeleted(name, id)
}
