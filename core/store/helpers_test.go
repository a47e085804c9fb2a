package store_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

// testTimeout bounds every store test's database work.
const testTimeout = time.Minute

// newStore returns a store on a fresh database and a context bounded by
// testTimeout.
func newStore(t *testing.T) (*storetest.Store, context.Context) {
	t.Helper()
	return storetest.Parallel(t)
}

func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func hash(b []byte) []byte {
	sum := sha256.Sum256(b)
	return sum[:]
}

// tokenID returns an id in the format nodetls gives tokens.
func tokenID(t testing.TB) string { return hex.EncodeToString(randomBytes(t, 16)) }

func fingerprint(der []byte) string { return "sha256:" + hex.EncodeToString(hash(der)) }

// newUUID stands in for the id source a caller passes to the store.
func newUUID(t testing.TB) uuid.UUID {
	t.Helper()
	id, err := uuid.NewRandom()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// wantClass fails the test unless err is of class class.
func wantClass(t testing.TB, err, class error) {
	t.Helper()
	if !errors.Is(err, class) {
		t.Fatalf("error %v, want class %v", err, class)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// claim claims the installation and issues n owner epochs.
func claim(t testing.TB, ctx context.Context, st *storetest.Store, n int) []uint64 {
	t.Helper()
	if _, err := st.ClaimInstallation(ctx, newUUID(t), "https://core.example"); err != nil {
		t.Fatal(err)
	}
	epochs := make([]uint64, n)
	for i := range epochs {
		e, err := st.NextOwnerEpoch(ctx)
		must(t, err)
		epochs[i] = e
	}
	return epochs
}

// idsOf returns the id of each item, in order.
func idsOf[T, ID any](items []T, id func(T) ID) []ID {
	out := make([]ID, len(items))
	for i, item := range items {
		out[i] = id(item)
	}
	return out
}

// pagedIDs reads a by-age listing to its end (storetest.Pages) and returns
// the ids of what it listed, in order, and each page's size.
func pagedIDs[T, C, ID any](t testing.TB, size int, page func(after C) ([]T, error),
	next func(last T) C, ids func([]T) []ID,
) ([]ID, []int) {
	t.Helper()
	items, sizes := storetest.Pages(t, size, page, next)
	return ids(items), sizes
}

// idPages reads an id-keyed listing (ListNodes, ListEnrollmentTokens) to
// its end: page reads the page after an id (the zero id first) and returns
// the next cursor, the zero id after the last page, which must be the
// page's last id. It returns the listed ids in order and each page's size.
func idPages[T any, ID comparable](t testing.TB, page func(after ID) ([]T, ID, error), id func(T) ID) ([]ID, []int) {
	t.Helper()
	var got []ID
	var sizes []int
	var after, none ID
	for {
		p, next, err := page(after)
		must(t, err)
		sizes = append(sizes, len(p))
		got = append(got, idsOf(p, id)...)
		if next == none {
			return got, sizes
		}
		if last := id(p[len(p)-1]); next != last {
			t.Fatalf("next cursor %v is not the page's last id %v", next, last)
		}
		after = next
	}
}

// newSession commits a Session of a new tenant (sessionParams, max_active
// 5) on st's present node and returns its input and its rows.
func newSession(t *testing.T, ctx context.Context, st *storetest.Owned) (store.CreateSessionParams, store.SessionBundle) {
	t.Helper()
	p := sessionParams(t, 5)
	b, err := st.CreateSession(ctx, p)
	must(t, err)
	return p, b
}

// newToken stores an enrollment token of a new id and secret that expires
// in an hour, and returns the id and the secret.
func newToken(t testing.TB, ctx context.Context, st *storetest.Store) (string, []byte) {
	t.Helper()
	id, secret := tokenID(t), randomBytes(t, 32)
	_, err := st.CreateEnrollmentToken(ctx, id, hash(secret), time.Hour)
	must(t, err)
	return id, secret
}

// wantLease asks for the execution lease for holder under epoch for ttl
// and fails the test unless the answer is want; what names the step, for
// the failure.
func wantLease(t testing.TB, ctx context.Context, st *storetest.Store, holder uuid.UUID, epoch uint64, ttl time.Duration,
	want bool, what string,
) {
	t.Helper()
	if ok, err := st.AcquireLease(ctx, holder, epoch, ttl); err != nil || ok != want {
		t.Fatalf("%s: %v, %v", what, ok, err)
	}
}

// newOwned returns a store on a fresh database acting for a lease-holding
// owner epoch (storetest.Owner).
func newOwned(t *testing.T) (*storetest.Owned, context.Context) {
	st, ctx := newStore(t)
	return storetest.Owner(t, st), ctx
}
