package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

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
	if ok, err := st.AcquireLease(ctx, b, epochs[1], time.Hour); err != nil || ok {
		t.Fatalf("B took A's unexpired lease: %v, %v", ok, err)
	}
	// A renews; then renews with a lifetime that is over at once.
	if ok, err := st.AcquireLease(ctx, a, epochs[0], time.Hour); err != nil || !ok {
		t.Fatalf("A could not renew: %v, %v", ok, err)
	}
	lease, err := st.GetLease(ctx)
	must(t, err)
	if lease.Holder != a || lease.OwnerEpoch != epochs[0] || lease.Expired || !lease.ExpiresAt.After(lease.RenewedAt) {
		t.Fatalf("lease after renewal = %+v", lease)
	}
	if ok, err := st.AcquireLease(ctx, a, epochs[0], expireNow); err != nil || !ok {
		t.Fatalf("A could not renew: %v, %v", ok, err)
	}
	lease, err = st.GetLease(ctx)
	must(t, err)
	if !lease.Expired {
		t.Fatalf("lease %+v has not expired by the database clock", lease)
	}

	// Expired: B, with the newer epoch, takes it.
	if ok, err := st.AcquireLease(ctx, b, epochs[1], time.Hour); err != nil || !ok {
		t.Fatalf("B could not take the expired lease: %v, %v", ok, err)
	}
	// A's epoch is superseded for good, expired lease or not.
	_, err = st.AcquireLease(ctx, a, epochs[0], time.Hour)
	wantClass(t, err, errdefs.ErrFenced)
	if ok, err := st.AcquireLease(ctx, b, epochs[1], expireNow); err != nil || !ok {
		t.Fatalf("B could not renew: %v, %v", ok, err)
	}
	_, err = st.AcquireLease(ctx, a, epochs[0], time.Hour)
	wantClass(t, err, errdefs.ErrFenced)
	// The holder of an expired lease that nobody took gets it back.
	if ok, err := st.AcquireLease(ctx, b, epochs[1], time.Hour); err != nil || !ok {
		t.Fatalf("B could not take back its own expired lease: %v, %v", ok, err)
	}
}

func TestLeaseRelease(t *testing.T) {
	st, ctx := newStore(t)
	epochs := claim(t, ctx, st, 3)
	a, b := newUUID(t), newUUID(t)
	_, err := st.GetLease(ctx)
	wantClass(t, err, errdefs.ErrNotFound)

	if ok, err := st.AcquireLease(ctx, a, epochs[0], time.Hour); err != nil || !ok {
		t.Fatalf("A: %v, %v", ok, err)
	}
	must(t, st.ReleaseLease(ctx, b, epochs[1])) // not B's: nothing happens
	if ok, err := st.AcquireLease(ctx, b, epochs[1], time.Hour); err != nil || ok {
		t.Fatalf("B took A's lease after B's release: %v, %v", ok, err)
	}
	must(t, st.ReleaseLease(ctx, a, epochs[0]))
	must(t, st.ReleaseLease(ctx, a, epochs[0])) // again: nothing to do
	if ok, err := st.AcquireLease(ctx, b, epochs[1], time.Hour); err != nil || !ok {
		t.Fatalf("B could not take a released lease: %v, %v", ok, err)
	}
	must(t, st.ReleaseLease(ctx, b, epochs[1]))
	// The released row remembers epoch 2: epoch 1 stays fenced, 3 may take it.
	_, err = st.AcquireLease(ctx, a, epochs[0], time.Hour)
	wantClass(t, err, errdefs.ErrFenced)
	if ok, err := st.AcquireLease(ctx, a, epochs[2], time.Hour); err != nil || !ok {
		t.Fatalf("A with a new epoch: %v, %v", ok, err)
	}
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
	if ok, err := st.AcquireLease(ctx, h, epochs[0], expireNow); err != nil || !ok {
		t.Fatalf("%v, %v", ok, err)
	}
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
