package sessions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"

	"berth.dev/core/projects"
	"berth.dev/core/secrets"
	"berth.dev/core/sessions"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/core/suspension"
	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestCreateSealsTheCredentialAndRetriesKeepIt(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	key, _, err := secrets.NewKey()
	must(t, err)
	installation := uuid.New()
	owned := storetest.Owner(t, st)
	node := storetest.EnabledNode(t, owned)
	storetest.Present(t, owned, node, 1)
	svc := sessions.New(owned, key, installation, uuid.New, suspension.New(owned.Owner, nil), nil)

	req := sessions.CreateRequest{RequestID: uuid.New(), TenantID: store.DefaultTenantID, ProjectID: store.DefaultProjectID, DisplayName: "s"}
	_, err = svc.Create(ctx, projects.All(), req)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("Create without a deployment: %v", err)
	}

	_, err = st.CommitGeneration(ctx, storetest.Seen(t, st), store.NewGeneration{
		ProviderKind: "docker", PublicConfig: json.RawMessage(`{}`), Observations: json.RawMessage(`{}`),
		Specification: sandbox.Specification{
			Resources: sandbox.Resources{CPUMillis: 1000, MemoryBytes: 1 << 30, DiskBytes: 4 << 30},
			MaxActive: 1, MaxRetained: 1,
		},
	})
	must(t, err)
	b, err := svc.Create(ctx, projects.All(), req)
	must(t, err)
	a := b.Allocation
	if !b.Created || a.NodeID != node || a.Generation != 1 || a.State != store.AllocationAllocated {
		t.Fatalf("bundle %+v", b)
	}
	sealed, err := st.GetAllocationCredential(ctx, a.ID)
	must(t, err)
	raw, err := key.Open(sealed.Nonce, sealed.Ciphertext, secrets.DeviceCredential(installation, a.ID))
	must(t, err)
	if !bytes.Equal(sessions.Digest(string(raw)), a.CredentialDigest) {
		t.Fatal("digest does not match the sealed credential")
	}
	f := runtimebootstrap.File{Version: runtimebootstrap.Version, CoreURL: "https://core.example", DeviceID: a.DeviceID.String(), Credential: runtimebootstrap.NewSecret(string(raw))}
	must(t, f.Validate())
	// Bound to its allocation: another allocation id does not open it.
	if _, err := key.Open(sealed.Nonce, sealed.Ciphertext, secrets.DeviceCredential(installation, uuid.New())); err == nil {
		t.Fatal("sealed credential opened under another allocation")
	}

	again, err := svc.Create(ctx, projects.All(), req)
	must(t, err)
	if again.Created || again.Allocation.ID != a.ID || !bytes.Equal(again.Allocation.CredentialDigest, a.CredentialDigest) {
		t.Fatalf("retry %+v", again)
	}

	// max_active comes from the deployment: the node is full.
	_, err = svc.Create(ctx, projects.All(), sessions.CreateRequest{RequestID: uuid.New(), TenantID: req.TenantID, ProjectID: req.ProjectID})
	if !errors.Is(err, store.ErrNoCapacity) {
		t.Fatalf("Create over max_active: %v", err)
	}

	del, err := svc.Delete(ctx, projects.All(), b.Session.ID)
	must(t, err)
	if del.Session.State != store.SessionDeleteRequested || del.Allocation.State != store.AllocationCleanupRequested {
		t.Fatalf("delete %+v", del)
	}
}

// TestCreateBoundsNodesByTheirRecordedCapacity: placement divides each
// node's recorded capacity (durable presence) by the deployment's
// per-sandbox resources, and a node whose presence record is stale gets
// nothing even with room.
func TestCreateBoundsNodesByTheirRecordedCapacity(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	key, _, err := secrets.NewKey()
	must(t, err)
	owned := storetest.Owner(t, st)
	node := storetest.EnabledNode(t, owned)
	res := sandbox.Resources{CPUMillis: 700, MemoryBytes: 1 << 30, DiskBytes: 4 << 30}
	_, err = st.CommitGeneration(ctx, storetest.Seen(t, st), store.NewGeneration{
		ProviderKind: "docker", PublicConfig: json.RawMessage(`{}`), Observations: json.RawMessage(`{}`),
		Specification: sandbox.Specification{Resources: res, MaxActive: 8, MaxRetained: 1},
	})
	must(t, err)
	report := func(cpu int64) {
		must(t, owned.RecordNodePresence(ctx, store.NodePresence{
			NodeID: node, ConnectionID: uuid.New(), Generation: 1, Ready: true,
			CPUMillis: cpu, MemoryBytes: storetest.Ample, DiskFreeBytes: storetest.Ample,
		}))
	}
	svc := sessions.New(owned, key, uuid.New(), uuid.New, suspension.New(owned.Owner, nil), nil)
	create := func() error {
		_, err := svc.Create(ctx, projects.All(), sessions.CreateRequest{RequestID: uuid.New(), TenantID: store.DefaultTenantID, ProjectID: store.DefaultProjectID})
		return err
	}
	report(699) // fits nothing of 700 millis
	if err := create(); !errors.Is(err, store.ErrNoCapacity) {
		t.Fatalf("a node that fits nothing: %v", err)
	}
	report(1399) // fits one
	if err := create(); err != nil {
		t.Fatalf("a node that fits one: %v", err)
	}
	if err := create(); !errors.Is(err, store.ErrNoCapacity) {
		t.Fatalf("a second sandbox on a node that fits one: %v", err)
	}
	report(storetest.Ample)
	if err := create(); err != nil {
		t.Fatalf("a node with room: %v", err)
	}
	if _, err := st.Pool().Exec(ctx, "UPDATE node_presence SET reported_at = now() - interval '46 seconds'"); err != nil {
		t.Fatal(err)
	}
	if err := create(); !errors.Is(err, store.ErrNoCapacity) {
		t.Fatalf("a node whose record is 46 s old: %v", err)
	}
}

// replacing commits a replacement of the deployment right before the
// first CreateSession reaches the store: the admission that read
// generation 1 meets generation 2 in its transaction.
type replacing struct {
	*storetest.Owned
	once sync.Once
	t    *testing.T
}

func (r *replacing) CreateSession(ctx context.Context, p store.CreateSessionParams) (store.SessionBundle, error) {
	r.once.Do(func() {
		next := store.NewGeneration{
			ProviderKind: "docker", PublicConfig: json.RawMessage(`{}`), Observations: json.RawMessage(`{}`),
			Specification: sandbox.Specification{Resources: sandbox.Resources{CPUMillis: 100, MemoryBytes: 2 << 30, DiskBytes: 1 << 30}, MaxActive: 8},
		}
		if _, err := r.Owner.ReplaceGeneration(ctx, storetest.Seen(r.t, r), next, store.Replacement{}, store.NewAdminProvenance(uuid.New()), uuid.New()); err != nil {
			r.t.Errorf("replace: %v", err)
		}
	})
	return r.Owner.CreateSession(ctx, p)
}

// TestCreateAfterAReplacementUsesTheNewGeneration: a replacement committed
// between Create's read of the current generation and its admission moves
// the admission (nothing written for generation 1); Create prepares it
// again and it is admitted for the new generation, with its resources.
func TestCreateAfterAReplacementUsesTheNewGeneration(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	key, _, err := secrets.NewKey()
	must(t, err)
	owned := storetest.Owner(t, st)
	node := storetest.EnabledNode(t, owned)
	_, err = st.CommitGeneration(ctx, storetest.Seen(t, st), store.NewGeneration{
		ProviderKind: "docker", PublicConfig: json.RawMessage(`{}`), Observations: json.RawMessage(`{}`),
		Specification: sandbox.Specification{Resources: sandbox.Resources{CPUMillis: 100, MemoryBytes: 1 << 30, DiskBytes: 1 << 30}, MaxActive: 8},
	})
	must(t, err)
	storetest.Present(t, owned, node, 2) // ready for the generation about to be committed
	svc := sessions.New(&replacing{Owned: owned, t: t}, key, uuid.New(), uuid.New, suspension.New(owned.Owner, nil), nil)
	b, err := svc.Create(ctx, projects.All(), sessions.CreateRequest{RequestID: uuid.New(), TenantID: store.DefaultTenantID, ProjectID: store.DefaultProjectID, DisplayName: "s"})
	must(t, err)
	if b.Placement.Generation != 2 || b.Allocation.Generation != 2 {
		t.Fatalf("admitted for generation %d (allocation %d), want 2", b.Placement.Generation, b.Allocation.Generation)
	}
	var sessionsStored int
	must(t, st.Pool().QueryRow(ctx, "SELECT count(*) FROM sessions").Scan(&sessionsStored))
	if sessionsStored != 1 {
		t.Fatalf("%d sessions stored, want 1", sessionsStored)
	}
}
