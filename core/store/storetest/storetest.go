package storetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"berth.dev/core/store"
	"berth.dev/sandbox/testenv"
)

const (
	// maxDatabases bounds the test databases that exist at once in one
	// test process.
	maxDatabases = 4
	// adminTimeout bounds each administrative step (create, migrate, drop)
	// and the wait for a free slot.
	adminTimeout = 2 * time.Minute
)

var slots = make(chan struct{}, maxDatabases)

// TestTimeout bounds the context Parallel gives a test.
const TestTimeout = time.Minute

// Store is the store with its read view and its unfenced writes
// embedded, for tests that act as several parts of Core at once. Core
// itself never composes the views this way: each consumer is given only
// the ones it needs.
type Store struct {
	*store.Store
	*store.Reader
	*store.Admin
	*store.Runtime
}

// Owned is a Store that also acts for a lease-holding owner epoch
// (Owner): the fenced writes beside everything else.
type Owned struct {
	*Store
	*store.Owner
}

// Wrap returns the test composition of st.
func Wrap(st *store.Store) *Store {
	return &Store{Store: st, Reader: st.Reader(), Admin: st.Admin(), Runtime: st.Runtime()}
}

// Parallel marks t parallel and returns a Store on a fresh, migrated
// database (New) and a context bounded by TestTimeout that ends with t:
// the start of every store-backed test fixture.
func Parallel(t *testing.T) (*Store, context.Context) {
	t.Helper()
	t.Parallel()
	st := New(t)
	ctx, cancel := context.WithTimeout(t.Context(), TestTimeout)
	t.Cleanup(cancel)
	return st, ctx
}

// New returns a Store on a fresh, migrated database that is dropped when
// the test ends. Without a test database it skips (fails under CI=true),
// as testenv.DatabaseURL does.
func New(t testing.TB) *Store {
	t.Helper()
	dsn := NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := store.Migrate(ctx, dsn); err != nil {
		t.Fatalf("storetest: %v", err)
	}
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(st.Close)
	return Wrap(st)
}

// NewDatabase creates an empty database (no schema) that is dropped when
// the test ends and returns its connection URL. The URL may hold a
// password: never log it.
func NewDatabase(t testing.TB) string {
	t.Helper()
	admin := testenv.DatabaseURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		t.Fatalf("storetest: no free test database slot within %s", adminTimeout)
	}
	t.Cleanup(func() { <-slots })

	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "berth_test_" + hex.EncodeToString(b[:])
	dsn, err := withDatabase(admin, name)
	if err != nil {
		t.Fatalf("storetest: %s is not a usable connection URL", testenv.DatabaseURLEnv)
	}
	ident := pgx.Identifier{name}.Sanitize()
	if err := adminExec(ctx, admin, "CREATE DATABASE "+ident); err != nil {
		t.Fatalf("storetest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		defer cancel()
		if err := adminExec(ctx, admin, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			t.Errorf("storetest: drop database %s: %v", name, err)
		}
	})
	return dsn
}

// adminExec runs one administrative statement on its own connection to
// the admin database.
func adminExec(ctx context.Context, admin, stmt string) error {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, stmt)
	return err
}

// withDatabase returns dsn (a URL or a keyword/value string) naming
// database name instead of its own.
func withDatabase(dsn, name string) (string, error) {
	if !strings.Contains(dsn, "://") {
		return dsn + " dbname=" + name, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", err
	}
	u.Path, u.RawPath = "/"+name, ""
	return u.String(), nil
}

// EnabledNode records an enrolled node with a random certificate and key
// hash and enables it, for tests that need a node to place on.
func EnabledNode(t testing.TB, st *Owned) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	der := make([]byte, 300)
	_, _ = rand.Read(der)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	fp := sha256.Sum256(der)
	n, err := st.CreateNode(ctx, uuid.New(), "node.test:7443", der, "sha256:"+hex.EncodeToString(fp[:]), key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetNodeState(ctx, n.ID, store.NodeEnrolled, store.NodeEnabled, store.NewAdminProvenance(uuid.New()), uuid.New()); err != nil {
		t.Fatal(err)
	}
	return n.ID
}

// Owner claims the installation (when unclaimed), issues a new owner epoch,
// takes the execution lease with it for an hour and returns st acting for
// that epoch (store.Store.AsOwner), as Core does at start-up.
func Owner(t testing.TB, st *Store) *Owned {
	t.Helper()
	ctx := context.Background()
	if _, err := st.ClaimInstallation(ctx, uuid.New(), "https://core.example"); err != nil {
		t.Fatal(err)
	}
	epoch, err := st.NextOwnerEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := st.AcquireLease(ctx, uuid.New(), epoch, time.Hour)
	if err != nil || !ok {
		t.Fatalf("storetest: acquire lease: %v, %v", ok, err)
	}
	return &Owned{Store: st, Owner: st.AsOwner(epoch)}
}

// Ample is a reported capacity that bounds no test deployment.
const Ample = int64(1) << 40

// Present records a fresh, ready health report of node for generation
// under owned's owner epoch, with Ample capacity, so placement may choose
// the node.
func Present(t testing.TB, owned interface {
	RecordNodePresence(ctx context.Context, p store.NodePresence) error
}, node uuid.UUID, generation uint64) {
	t.Helper()
	err := owned.RecordNodePresence(context.Background(), store.NodePresence{
		NodeID: node, ConnectionID: uuid.New(), Generation: generation,
		Ready: true, CPUMillis: Ample, MemoryBytes: Ample, DiskFreeBytes: Ample,
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Absent makes node's presence record stop counting (its connection
// ended), so placement passes it over.
func Absent(t testing.TB, st *Owned, node uuid.UUID) {
	t.Helper()
	p, err := st.GetNodePresence(context.Background(), node)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.MarkNodeDisconnected(context.Background(), node, p.ConnectionID); err != nil {
		t.Fatal(err)
	}
}

// RunningSession commits a Session on a new enabled, present node whose
// allocation was created and observed running with completed bootstrap, as
// the lifecycle worker records it, and returns it with its device
// credential. owned acts for the lease-holding owner epoch (Owner).
func RunningSession(t testing.TB, owned *Owned) (store.SessionBundle, []byte) {
	t.Helper()
	ctx := context.Background()
	node := EnabledNode(t, owned)
	Present(t, owned, node, 1)
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	// The credential's form as core/sessions makes it: unpadded base64url.
	cred := []byte(base64.RawURLEncoding.EncodeToString(raw))
	digest := sha256.Sum256(cred)
	sealed := make([]byte, 48)
	_, _ = rand.Read(sealed)
	b, err := owned.CreateSession(ctx, store.CreateSessionParams{
		RequestID: uuid.New(), TenantID: store.DefaultTenantID, ProjectID: store.DefaultProjectID, DisplayName: "running",
		SessionID: uuid.New(), EnvironmentID: uuid.New(), AllocationID: uuid.New(), DeviceID: uuid.New(),
		CredentialDigest: digest[:], CredentialCiphertext: sealed, CredentialNonce: sealed[:12],
		CreateReceipt: uuid.New(), Generation: 1, MaxActive: 5,
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := owned.ClaimCreate(ctx, b.Allocation.ID, b.Allocation.CreateReceipt)
	if err != nil {
		t.Fatal(err)
	}
	a, err = owned.RecordCreateOutcome(ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateRunning, ProviderID: "c-" + a.ID.String(), BootstrapComplete: true})
	if err != nil {
		t.Fatal(err)
	}
	b.Allocation = a
	return b, cred
}

// Pages reads a by-age listing (nodes, enrollment tokens) to its end as a
// client pages it, for the tests of the store and of the packages that list
// through it: page reads up to size items after a cursor (the zero cursor
// first), next is the cursor after the last item of a full page. It
// returns every item in order and each page's size, so a test checks both
// the order and the paging; a failed read fails the test.
func Pages[T, C any](t testing.TB, size int, page func(after C) ([]T, error), next func(last T) C) (items []T, sizes []int) {
	t.Helper()
	var after C
	for {
		p, err := page(after)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(p))
		items = append(items, p...)
		if len(p) < size {
			return items, sizes
		}
		after = next(p[len(p)-1])
	}
}

// Release records a's cleanup as confirmed, at a's revision (its cleanup
// requested), and releases it, as a node's worker does once the compute is
// gone. It returns the released allocation.
func Release(t testing.TB, owned interface {
	RecordCleanup(ctx context.Context, id uuid.UUID, revision int64, confirmed bool) (store.Allocation, error)
	Release(ctx context.Context, id uuid.UUID) (store.Allocation, error)
}, a store.Allocation) store.Allocation {
	t.Helper()
	ctx := context.Background()
	a, err := owned.RecordCleanup(ctx, a.ID, a.Revision, true)
	if err != nil {
		t.Fatal(err)
	}
	if a, err = owned.Release(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	return a
}

// As returns st acting for owner epoch epoch (store.Store.AsOwner), whose
// lease the caller took.
func As(st *Store, epoch uint64) *Owned {
	return &Owned{Store: st, Owner: st.AsOwner(epoch)}
}

// Seen reads the current deployment generation as the token a commit
// takes (store.GenerationSeen), failing t when it cannot.
func Seen(t testing.TB, st interface {
	SeenGeneration(context.Context) (store.GenerationSeen, error)
}) store.GenerationSeen {
	t.Helper()
	seen, err := st.SeenGeneration(context.Background())
	if err != nil {
		t.Fatalf("read the current deployment generation: %v", err)
	}
	return seen
}
