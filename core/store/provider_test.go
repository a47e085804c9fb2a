package store_test

import (
	"testing"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/sandbox/errdefs"
)

func TestProviderSwitchRefusesAdmissionOnly(t *testing.T) {
	st, ctx := ownedStore(t)
	presentNode(t, ctx, st)
	sw, err := st.GetProviderSwitch(ctx)
	must(t, err)
	if sw.Disabled || sw.DisabledAt != nil {
		t.Fatalf("initial switch = %+v", sw)
	}
	// A Session committed before the switch, with a fresh receipt, and
	// one running.
	pending, err := st.CreateSession(ctx, sessionParams(t, 5))
	must(t, err)

	sw, err = st.SetProviderDisabled(ctx, true, store.NewAdminProvenance(uuid.New()), uuid.New())
	must(t, err)
	if !sw.Disabled || sw.DisabledAt == nil {
		t.Fatalf("disabled switch = %+v", sw)
	}
	again, err := st.SetProviderDisabled(ctx, true, store.NewAdminProvenance(uuid.New()), uuid.New())
	must(t, err)
	if !again.DisabledAt.Equal(*sw.DisabledAt) {
		t.Fatal("disabling again moved the time")
	}

	// No new Session, and no Create claim: the receipt stays fresh.
	_, err = st.CreateSession(ctx, sessionParams(t, 5))
	wantClass(t, err, errdefs.ErrFailedPrecondition)
	if r, ok := errdefs.AsRefusal(err); !ok || r.Reason != "provider_disabled" {
		t.Fatalf("refusal = %v, %v", r, err)
	}
	_, err = st.ClaimCreate(ctx, pending.Allocation.ID, pending.Allocation.CreateReceipt)
	wantClass(t, err, store.ErrProviderDisabled)
	a, err := st.GetAllocation(ctx, pending.Allocation.ID)
	must(t, err)
	if a.State != store.AllocationAllocated {
		t.Fatalf("allocation = %s", a.State)
	}
	// Deletion and cleanup are never blocked.
	b, err := st.RequestSessionDeletion(ctx, pending.Session.ID)
	must(t, err)
	if b.Allocation.State != store.AllocationCleanupRequested {
		t.Fatalf("allocation after deletion = %s", b.Allocation.State)
	}
	storetest.Release(t, st, b.Allocation)

	// Enabled again: admission resumes.
	sw, err = st.SetProviderDisabled(ctx, false, store.NewAdminProvenance(uuid.New()), uuid.New())
	must(t, err)
	if sw.Disabled || sw.DisabledAt != nil {
		t.Fatalf("enabled switch = %+v", sw)
	}
	next, err := st.CreateSession(ctx, sessionParams(t, 5))
	must(t, err)
	_, err = st.ClaimCreate(ctx, next.Allocation.ID, next.Allocation.CreateReceipt)
	must(t, err)
}
