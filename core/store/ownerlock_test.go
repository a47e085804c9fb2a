package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/sandbox/errdefs"
)

// TestOwnerLockTakeoverNeedsTheHolderGone: a lease taken under the owner
// lock is recorded locked; a second Core cannot take the lock or the
// lease while the holder's lock connection lives, waits on the lock, and
// the moment that connection ends takes the unexpired lease over with its
// newer epoch; the previous holder's owner writes are fenced from then on
// and its renewal is refused ErrOwnerLockTaken.
func TestOwnerLockTakeoverNeedsTheHolderGone(t *testing.T) {
	st, ctx := newStore(t)
	epochs := claim(t, ctx, st, 2)
	a, b := newUUID(t), newUUID(t)
	lockA, lockB := st.OwnerLock(), st.OwnerLock()
	t.Cleanup(lockA.Close)
	t.Cleanup(lockB.Close)

	if got, err := lockA.Try(ctx); err != nil || !got {
		t.Fatalf("A could not take the free lock: %v, %v", got, err)
	}
	ok, err := lockA.AcquireLease(ctx, a, epochs[0], time.Hour)
	must(t, err)
	if !ok {
		t.Fatal("A could not take the free lease under the lock")
	}
	lease, err := st.GetLease(ctx)
	must(t, err)
	if !lease.Locked || lease.Holder != a {
		t.Fatalf("lease %+v", lease)
	}
	if got, err := lockB.Try(ctx); err != nil || got {
		t.Fatalf("B took the lock A holds: %v, %v", got, err)
	}
	if ok, err := lockB.AcquireLease(ctx, b, epochs[1], time.Hour); ok || err != nil {
		t.Fatalf("B's lease without the lock: %v, %v", ok, err)
	}

	waited := make(chan error, 1)
	go func() { waited <- lockB.Wait(ctx) }()
	select {
	case err := <-waited:
		t.Fatalf("B's wait returned while A holds the lock: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	lockA.Close() // A's process died: its connection ended
	must(t, <-waited)
	ok, err = lockB.AcquireLease(ctx, b, epochs[1], time.Hour)
	must(t, err)
	if !ok {
		t.Fatal("B, holding the lock, could not take over A's unexpired locked lease")
	}
	lease, err = st.GetLease(ctx)
	must(t, err)
	if lease.Holder != b || lease.OwnerEpoch != epochs[1] || lease.Expired || !lease.Locked {
		t.Fatalf("lease after the takeover %+v", lease)
	}
	if err := st.AsOwner(epochs[0]).RecordResetProgress(ctx, uuid.New(), 0, 0); !errdefs.IsFenced(err) {
		t.Fatalf("A's owner write after the takeover: %v", err)
	}
	if _, err := lockA.AcquireLease(ctx, a, epochs[0], time.Hour); !errdefs.IsFenced(err) {
		t.Fatalf("A's renewal after the takeover: %v", err)
	}
}

// TestOwnerLockLeavesAnUnlockedLeaseToExpire: a lease taken without the
// lock (a Core of an earlier version) is not taken over early by a Core
// holding the lock, only once it expired.
func TestOwnerLockLeavesAnUnlockedLeaseToExpire(t *testing.T) {
	st, ctx := newStore(t)
	epochs := claim(t, ctx, st, 2)
	a, b := newUUID(t), newUUID(t)
	wantLease(t, ctx, st, a, epochs[0], time.Hour, true, "A could not take the free lease")
	lock := st.OwnerLock()
	t.Cleanup(lock.Close)
	must(t, lock.Wait(ctx))
	ok, err := lock.AcquireLease(ctx, b, epochs[1], time.Hour)
	must(t, err)
	if ok {
		t.Fatal("B took over an unexpired lease taken without the lock")
	}
	wantLease(t, ctx, st, a, epochs[0], expireNow, true, "A could not renew")
	ok, err = lock.AcquireLease(ctx, b, epochs[1], time.Hour)
	must(t, err)
	if !ok {
		t.Fatal("B could not take the expired lease")
	}
}

// TestOwnerLockSurvivesItsConnection: when the lock's connection is cut
// (a database restart, its backend terminated) and no other Core took the
// lock, the next renewal dials again, takes the lock back and renews; a
// wait ends with its context.
func TestOwnerLockSurvivesItsConnection(t *testing.T) {
	st, ctx := newStore(t)
	epochs := claim(t, ctx, st, 1)
	a := newUUID(t)
	lock := st.OwnerLock()
	t.Cleanup(lock.Close)
	must(t, lock.Wait(ctx))
	ok, err := lock.AcquireLease(ctx, a, epochs[0], time.Hour)
	must(t, err)
	if !ok {
		t.Fatal("A could not take the lease")
	}
	tag, err := st.Pool().Exec(ctx, `SELECT pg_terminate_backend(l.pid) FROM pg_locks l
		JOIN pg_database d ON d.oid = l.database AND d.datname = current_database()
		WHERE l.locktype = 'advisory' AND l.classid = 1650815604 AND l.objid = 1 AND l.granted`)
	must(t, err)
	if tag.RowsAffected() != 1 {
		t.Fatalf("terminated %d lock holders", tag.RowsAffected())
	}
	// pg_terminate_backend only signals: wait until the backend is gone
	// and its lock with it.
	for deadline := time.Now().Add(10 * time.Second); ; {
		var held bool
		must(t, st.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks l
			JOIN pg_database d ON d.oid = l.database AND d.datname = current_database()
			WHERE l.locktype = 'advisory' AND l.classid = 1650815604 AND l.objid = 1 AND l.granted)`).Scan(&held))
		if !held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the terminated backend still holds the lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	renewed := false
	for range 3 { // the first attempt may meet the dead connection
		if ok, err := lock.AcquireLease(ctx, a, epochs[0], time.Hour); err == nil && ok {
			renewed = true
			break
		}
	}
	if !renewed {
		t.Fatal("the lease was not renewed after the lock's connection was cut")
	}
	lease, err := st.GetLease(ctx)
	must(t, err)
	if !lease.Locked || lease.Holder != a {
		t.Fatalf("lease %+v", lease)
	}
	other := st.OwnerLock()
	t.Cleanup(other.Close)
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := other.Wait(wctx); err == nil {
		t.Fatal("a second session took the lock A took back")
	}
}

// TestOwnerLockNeverWaitsPastTheLease: a lock whose session PostgreSQL
// has not seen die (here: another session holding it) keeps no Core
// waiting past the lease's expiry: without the lock, AcquireLease takes
// the expired lease, records it unlocked and renews it, and a Core that
// then takes the lock cannot take that unlocked lease over early.
func TestOwnerLockNeverWaitsPastTheLease(t *testing.T) {
	st, ctx := newStore(t)
	epochs := claim(t, ctx, st, 3)
	a, b, c := newUUID(t), newUUID(t), newUUID(t)
	zombie := st.OwnerLock()
	t.Cleanup(zombie.Close)
	must(t, zombie.Wait(ctx))
	ok, err := zombie.AcquireLease(ctx, a, epochs[0], expireNow)
	must(t, err)
	if !ok {
		t.Fatal("A could not take the lease")
	}
	lock := st.OwnerLock()
	t.Cleanup(lock.Close)
	if got, err := lock.Try(ctx); err != nil || got {
		t.Fatalf("B took the lock the zombie holds: %v, %v", got, err)
	}
	ok, err = lock.AcquireLease(ctx, b, epochs[1], time.Hour)
	must(t, err)
	if !ok {
		t.Fatal("B could not take the expired lease without the lock")
	}
	lease, err := st.GetLease(ctx)
	must(t, err)
	if lease.Holder != b || lease.Locked {
		t.Fatalf("lease taken without the lock %+v", lease)
	}
	if ok, err := lock.AcquireLease(ctx, b, epochs[1], time.Hour); err != nil || !ok {
		t.Fatalf("B's renewal without the lock: %v, %v", ok, err)
	}
	zombie.Close()
	third := st.OwnerLock()
	t.Cleanup(third.Close)
	must(t, third.Wait(ctx))
	if ok, err := third.AcquireLease(ctx, c, epochs[2], time.Hour); err != nil || ok {
		t.Fatalf("C took over B's unexpired unlocked lease: %v, %v", ok, err)
	}
}
