package sessionadmin_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

// TestGRPCDirectLaneHasNoNode: a Session of a direct generation is placed
// on the direct lane, and its Session and its Allocation name no node
// (the field is empty for a provider without nodes).
func TestGRPCDirectLaneHasNoNode(t *testing.T) {
	f := newFixture(t)
	g, err := f.St.CommitGeneration(f.Ctx, storetest.Seen(t, f.St), store.NewGeneration{
		ProviderKind: "direct-test", PublicConfig: json.RawMessage(`{}`), Observations: json.RawMessage(`{}`),
		Mode: store.ModeDirect,
		Specification: sandbox.Specification{
			Resources: sandbox.Resources{CPUMillis: 1000, MemoryBytes: 1 << 30, DiskBytes: 4 << 30},
			MaxActive: 10, MaxRetained: 1,
		},
	})
	errdefstest.Must(t, err)
	_, err = f.St.RecordDirectReadiness(f.Ctx, store.DirectReadiness{Generation: int64(g.Generation), Ready: true})
	errdefstest.Must(t, err)
	c := f.serve(t)
	ctx := c.authed(f.Ctx)
	r, err := c.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString()})
	errdefstest.Must(t, err)
	if r.GetSession().GetNode() != "" {
		t.Fatalf("direct Session names node %q", r.GetSession().GetNode())
	}
	allocID := uuid.MustParse(strings.TrimPrefix(r.GetSession().GetAllocation(), "allocations/"))
	a, err := f.St.GetAllocation(f.Ctx, allocID)
	errdefstest.Must(t, err)
	if a.NodeID != store.DirectLane {
		t.Fatalf("allocation on %s, want the direct lane", a.NodeID)
	}
	got, err := c.GetAllocation(ctx, &adminv1.GetAllocationRequest{Name: "allocations/" + allocID.String()})
	errdefstest.Must(t, err)
	if got.GetAllocation().GetNode() != "" || got.GetAllocation().GetGeneration() != g.Generation {
		t.Fatalf("direct allocation %v", got.GetAllocation())
	}
}
