package store_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/sandbox/errdefs"
)

// expireNow is a lease lifetime that ends before the next statement: the
// database clock (the transaction start) has moved on by then.
const expireNow = time.Microsecond

func TestLeaseExclusiveByDatabaseClock(t *testing.T) {
	st, ctx := newStore(t)
	epochs := claim(t, ctx, st, 2)
	a, b := newUUID(t), newUUID(t)

	ok, err := st.AcquireLease(ctx, a, epochs[0], time.Hour)
	must(t, err)
	if !ok {
		t.Fatal("A could not take a free lease")
	}
	wantLease(t, ctx, st, b, epochs[1], time.Hour, false, "B took A's unexpired lease")
	// A renews; then renews with a lifetime that is over at once.
	wantLease(t, ctx, st, a, epochs[0], time.Hour, true, "A could not renew")
	lease, err := st.GetLease(ctx)
	must(t, err)
	if lease.Holder != a || lease.OwnerEpoch != epochs[0] || lease.Expired || !lease.ExpiresAt.After(lease.RenewedAt) {
		t.Fatalf("lease after renewal = %+v", lease)
	}
	wantLease(t, ctx, st, a, epochs[0], expireNow, true, "A could not renew")
	lease, err = st.GetLease(ctx)
	must(t, err)
	if !lease.Expired {
		t.Fatalf("lease %+v has not expired by the database clock", lease)
	}

	// Expired: B, with the newer epoch, takes it.
	wantLease(t, ctx, st, b, epochs[1], time.Hour, true, "B could not take the expired lease")
	// A's epoch is superseded for good, expired lease or not.
	_, err = st.AcquireLease(ctx, a, epochs[0], time.Hour)
	wantClass(t, err, errdefs.ErrFenced)
	wantLease(t, ctx, st, b, epochs[1], expireNow, true, "B could not renew")
	_, err = st.AcquireLease(ctx, a, epochs[0], time.Hour)
	wantClass(t, err, errdefs.ErrFenced)
	// The holder of an expired lease that nobody took gets it back.
	wantLease(t, ctx, st, b, epochs[1], time.Hour, true, "B could not take back its own expired lease")
}

func TestLeaseRelease(t *testing.T) {
	st, ctx := newStore(t)
	epochs := claim(t, ctx, st, 3)
	a, b := newUUID(t), newUUID(t)
	_, err := st.GetLease(ctx)
	wantClass(t, err, errdefs.ErrNotFound)

	wantLease(t, ctx, st, a, epochs[0], time.Hour, true, "A")
	must(t, st.ReleaseLease(ctx, b, epochs[1])) // not B's: nothing happens
	wantLease(t, ctx, st, b, epochs[1], time.Hour, false, "B took A's lease after B's release")
	must(t, st.ReleaseLease(ctx, a, epochs[0]))
	must(t, st.ReleaseLease(ctx, a, epochs[0])) // again: nothing to do
	wantLease(t, ctx, st, b, epochs[1], time.Hour, true, "B could not take a released lease")
	must(t, st.ReleaseLease(ctx, b, epochs[1]))
	// The released row remembers epoch 2: epoch 1 stays fenced, 3 may take it.
	_, err = st.AcquireLease(ctx, a, epochs[0], time.Hour)
	wantClass(t, err, errdefs.ErrFenced)
	wantLease(t, ctx, st, a, epochs[2], time.Hour, true, "A with a new epoch")
}

func TestLeaseRefusesBadInput(t *testing.T) {
	st, ctx := newStore(t)
	_, err := st.AcquireLease(ctx, newUUID(t), 1, time.Hour)
	wantClass(t, err, errdefs.ErrNotFound) // no installation, no epoch
	epochs := claim(t, ctx, st, 1)
	for _, tt := range []struct {
		holder uuid.UUID
		epoch  uint64
		ttl    time.Duration
	}{
		{uuid.Nil, epochs[0], time.Hour},
		{newUUID(t), 0, time.Hour},
		{newUUID(t), epochs[0] + 1, time.Hour}, // never issued
		{newUUID(t), 1 << 63, time.Hour},
		{newUUID(t), epochs[0], 0},
		{newUUID(t), epochs[0], -time.Second},
	} {
		ok, err := st.AcquireLease(ctx, tt.holder, tt.epoch, tt.ttl)
		if ok {
			t.Errorf("AcquireLease(%v, %d, %v) took the lease", tt.holder, tt.epoch, tt.ttl)
		}
		wantClass(t, err, errdefs.ErrInvalid)
	}
	// One holder, one epoch: another holder cannot use the same epoch.
	h := newUUID(t)
	wantLease(t, ctx, st, h, epochs[0], expireNow, true, "the first holder")
	_, err = st.AcquireLease(ctx, newUUID(t), epochs[0], time.Hour)
	wantClass(t, err, errdefs.ErrFenced)
}

func TestLeaseRaceHasOneWinner(t *testing.T) {
	st, ctx := newStore(t)
	const cores = 8
	epochs := claim(t, ctx, st, cores)
	holders := make([]uuid.UUID, cores)
	for i := range holders {
		holders[i] = newUUID(t)
	}
	won := make([]bool, cores)
	errs := make([]error, cores)
	var wg sync.WaitGroup
	for i := range cores {
		wg.Go(func() { won[i], errs[i] = st.AcquireLease(ctx, holders[i], epochs[i], time.Hour) })
	}
	wg.Wait()
	winners := 0
	for i := range cores {
		if errs[i] != nil {
			// A loser whose epoch is older than the winner's is fenced.
			wantClass(t, errs[i], errdefs.ErrFenced)
		}
		if won[i] {
			winners++
		}
	}
	if winners != 1 {
		t.Errorf("%d Cores hold the lease, want 1", winners)
	}
}

// TestLifecycleWritesAreFencedByTheOwnerEpoch: every lifecycle write checks,
// in its own transaction, that the Store's owner epoch holds the unexpired
// execution lease. A standby's newer epoch alone does not stop the holder;
// a lapsed lease or another epoch's takeover does, before the old Core
// notices anything, with store.ErrSuperseded (class ErrFenced), and the
// refused write changes nothing.
func TestLifecycleWritesAreFencedByTheOwnerEpoch(t *testing.T) {
	base, ctx := newStore(t)
	epochs := claim(t, ctx, base, 1)
	oldHolder := newUUID(t)
	ok, err := base.AcquireLease(ctx, oldHolder, epochs[0], time.Hour)
	if err != nil || !ok {
		t.Fatalf("lease: %v %v", ok, err)
	}
	old := storetest.As(base, epochs[0])
	node := enabledNode(t, ctx, old)
	storetest.Present(t, old, node, 1)

	create := func(st *storetest.Owned) (store.CreateSessionParams, error) {
		p := sessionParams(t, 50)
		_, err := st.CreateSession(ctx, p)
		return p, err
	}
	s1, err := create(old)
	must(t, err)
	s2, err := create(old)
	must(t, err)
	// s3: deleted, cleanup confirmed; never sent, so releasable.
	s3, err := create(old)
	must(t, err)
	b3, err := old.RequestSessionDeletion(ctx, s3.SessionID)
	must(t, err)
	a3, err := old.RecordCleanup(ctx, b3.Allocation.ID, b3.Allocation.Revision, true)
	must(t, err)

	// A plain Store has no lifecycle writes at all (they do not compile);
	// an Owner bound to no epoch is refused.
	_, err = base.AsOwner(0).ClaimCreate(ctx, s1.AllocationID, s1.CreateReceipt)
	wantClass(t, err, store.ErrSuperseded)

	// A standby issues a newer epoch and waits: the holder keeps acting.
	standby, err := base.NextOwnerEpoch(ctx)
	must(t, err)
	a1, err := old.ClaimCreate(ctx, s1.AllocationID, s1.CreateReceipt)
	must(t, err)

	// The old lease lapses (the old Core stalled): fenced at once, by the
	// database clock, although the old Core was not told.
	if _, err := base.Pool().Exec(ctx, "UPDATE execution_lease SET expires_at = now() - interval '1 second'"); err != nil {
		t.Fatal(err)
	}
	_, err = old.ClaimCreate(ctx, s2.AllocationID, s2.CreateReceipt)
	wantClass(t, err, store.ErrSuperseded)

	// The standby takes the lease over.
	ok, err = base.AcquireLease(ctx, newUUID(t), standby, time.Hour)
	if err != nil || !ok {
		t.Fatalf("takeover: %v %v", ok, err)
	}
	cur := storetest.As(base, standby)
	before := map[uuid.UUID]store.Allocation{}
	for _, id := range []uuid.UUID{s1.AllocationID, s2.AllocationID, a3.ID} {
		before[id], err = base.GetAllocation(ctx, id)
		must(t, err)
	}
	// Every lifecycle write of the old epoch is refused with the typed error.
	for name, call := range map[string]func() error{
		"ClaimCreate": func() error { _, err := old.ClaimCreate(ctx, s2.AllocationID, s2.CreateReceipt); return err },
		"RecordCreateOutcome": func() error {
			_, err := old.RecordCreateOutcome(ctx, a1.CreateAttempt(), store.CreateOutcome{Kind: store.CreateAbsent})
			return err
		},
		"ResolveCreateFailure": func() error { _, err := old.ResolveCreateFailure(ctx, a1.ID, a1.Revision); return err },
		"AbandonCreate": func() error {
			_, _, err := old.AbandonCreate(ctx, s2.AllocationID, 1, time.Second)
			return err
		},
		"RequestCleanup": func() error { _, err := old.RequestCleanup(ctx, s2.AllocationID); return err },
		"RecordCleanup":  func() error { _, err := old.RecordCleanup(ctx, a3.ID, a3.Revision, false); return err },
		"Release":        func() error { _, err := old.Release(ctx, a3.ID); return err },
		"RequestSessionDeletion": func() error {
			_, err := old.RequestSessionDeletion(ctx, s2.SessionID)
			return err
		},
		"CreateSession": func() error { _, err := create(old); return err },
		"AllocatePending": func() error {
			_, err := old.AllocatePending(ctx, store.PendingAllocationParams{
				EnvironmentID: s3.EnvironmentID, NodeID: node, AllocationID: newUUID(t), DeviceID: newUUID(t),
				CredentialDigest: hash(randomBytes(t, 32)), CredentialCiphertext: randomBytes(t, 48),
				CredentialNonce: randomBytes(t, 12), CreateReceipt: newUUID(t),
			})
			return err
		},
	} {
		err := call()
		if !errors.Is(err, store.ErrSuperseded) || !errors.Is(err, errdefs.ErrFenced) {
			t.Errorf("%s under the superseded epoch: %v, want ErrSuperseded (ErrFenced)", name, err)
		}
	}
	// ...and changed nothing.
	for id, want := range before {
		got, err := base.GetAllocation(ctx, id)
		must(t, err)
		if got.State != want.State || got.Revision != want.Revision {
			t.Errorf("allocation %s moved from %s/%d to %s/%d", id, want.State, want.Revision, got.State, got.Revision)
		}
	}
	if b, err := base.GetSession(ctx, s2.SessionID); err != nil || b.Session.State != store.SessionActive {
		t.Errorf("session 2 after the refused deletion: %+v, %v", b.Session, err)
	}
	held, err := base.NodeHeld(ctx, node)
	must(t, err)
	if held != 3 {
		t.Errorf("node holds %d, want 3 (no refused write placed or released)", held)
	}

	// The new owner acts on the same rows.
	storetest.Present(t, cur, node, 1)
	_, err = cur.ClaimCreate(ctx, s2.AllocationID, s2.CreateReceipt)
	must(t, err)
	a3, err = cur.Release(ctx, a3.ID)
	must(t, err)
	if a3.State != store.AllocationReleased {
		t.Fatalf("release by the new owner: %+v", a3)
	}
	_, err = create(cur)
	must(t, err)
}
