package store_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/sandbox/errdefs"
)

// TestProjectKeyMethodsHaveTheirAuthority: creating and revoking a key is
// an administrator's intent (Admin); the index's and the check's reads
// are Reader's.
func TestProjectKeyMethodsHaveTheirAuthority(t *testing.T) {
	for typ, want := range map[string]struct {
		v       any
		methods []string
	}{
		"Admin":  {&store.Admin{}, []string{"CreateProjectKey", "RevokeProjectKey"}},
		"Reader": {&store.Reader{}, []string{"GetProjectKey", "ListProjectKeysByAge", "LiveProjectKeys", "VerifyProjectKey"}},
	} {
		have := methods(want.v)
		for _, m := range want.methods {
			if !slices.Contains(have, m) {
				t.Errorf("%s.%s is missing", typ, m)
			}
		}
	}
}

func newKey(project uuid.UUID, name string) store.NewProjectKey {
	d := sha256.Sum256([]byte(uuid.NewString()))
	return store.NewProjectKey{RequestID: uuid.New(), ID: uuid.New(), ProjectID: project, Digest: d[:], DisplayName: name}
}

// live reports whether key id is live by both reads.
func live(t *testing.T, ctx context.Context, st *storetest.Owned, id uuid.UUID) bool {
	t.Helper()
	_, err := st.VerifyProjectKey(ctx, id)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatal(err)
	}
	all, lerr := st.LiveProjectKeys(ctx)
	must(t, lerr)
	listed := slices.ContainsFunc(all, func(k store.LiveKey) bool { return k.ID == id })
	if listed != (err == nil) {
		t.Fatalf("key %s: listed live %v, verified live %v", id, listed, err == nil)
	}
	return listed
}

// TestProjectKeyLifecycle: a key is created idempotently in a live
// project with its tenant, authenticates until it is revoked, expires or
// its project is deleted (each decided by the database), and another
// project cannot revoke it.
func TestProjectKeyLifecycle(t *testing.T) {
	st, ctx := storetest.Parallel(t)
	owned := storetest.Owner(t, st)
	tenant, project := newProject(t, ctx, owned)
	_, other := newProject(t, ctx, owned)

	k := newKey(project, "ci")
	key, created, err := owned.CreateProjectKey(ctx, k)
	must(t, err)
	if !created || key.ProjectID != project || key.TenantID != tenant || key.RevokedAt != nil {
		t.Fatalf("created %+v, %v", key, created)
	}
	again, created, err := owned.CreateProjectKey(ctx, k)
	must(t, err)
	if created || again.ID != key.ID {
		t.Fatal("a retried create made another key")
	}
	changed := k
	changed.DisplayName = "other"
	if _, _, err := owned.CreateProjectKey(ctx, changed); !errors.Is(err, errdefs.ErrExists) {
		t.Fatalf("same request id, another name: %v", err)
	}
	if _, _, err := owned.CreateProjectKey(ctx, newKey(uuid.New(), "x")); !errors.Is(err, store.ErrProjectNotFound) {
		t.Fatalf("missing project: %v", err)
	}
	past := time.Now().Add(-time.Minute)
	expired := newKey(project, "old")
	expired.ExpireAt = &past
	if _, _, err := owned.CreateProjectKey(ctx, expired); !errdefs.IsInvalid(err) {
		t.Fatalf("expiry in the past: %v", err)
	}
	if !live(t, ctx, owned, key.ID) {
		t.Fatal("a new key is not live")
	}

	if _, err := owned.RevokeProjectKey(ctx, other, key.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("revoked by another project: %v", err)
	}
	if !live(t, ctx, owned, key.ID) {
		t.Fatal("another project's revocation took effect")
	}
	revoked, err := owned.RevokeProjectKey(ctx, project, key.ID)
	must(t, err)
	if revoked.RevokedAt == nil || live(t, ctx, owned, key.ID) {
		t.Fatal("a revoked key is live")
	}
	first := *revoked.RevokedAt
	revoked, err = owned.RevokeProjectKey(ctx, project, key.ID)
	must(t, err)
	if !revoked.RevokedAt.Equal(first) {
		t.Fatal("revoking again moved the revocation time")
	}

	// Expiry is the database clock's: moved in SQL, with nothing in Go.
	soon := time.Now().Add(time.Hour)
	ek := newKey(project, "expiring")
	ek.ExpireAt = &soon
	exp, _, err := owned.CreateProjectKey(ctx, ek)
	must(t, err)
	if !live(t, ctx, owned, exp.ID) {
		t.Fatal("a key before its expiry is not live")
	}
	_, err = owned.Pool().Exec(ctx, `UPDATE project_keys SET created_at = now() - interval '2 hours', expire_at = now() - interval '1 second' WHERE id = $1`, exp.ID)
	must(t, err)
	if live(t, ctx, owned, exp.ID) {
		t.Fatal("an expired key is live")
	}
	if got, err := owned.GetProjectKey(ctx, exp.ID); err != nil || !got.Expired {
		t.Fatalf("GetProjectKey of an expired key: expired %v, %v", got.Expired, err)
	}
	if got, err := owned.GetProjectKey(ctx, key.ID); err != nil || got.Expired {
		t.Fatalf("GetProjectKey of a revoked key without expiry: expired %v, %v", got.Expired, err)
	}

	// A deleted project's keys stop at once.
	dk, _, err := owned.CreateProjectKey(ctx, newKey(other, "d"))
	must(t, err)
	_, err = owned.Pool().Exec(ctx, `UPDATE projects SET deleted_at = now() WHERE id = $1`, other)
	must(t, err)
	if live(t, ctx, owned, dk.ID) {
		t.Fatal("a deleted project's key is live")
	}
	if _, _, err := owned.CreateProjectKey(ctx, newKey(other, "late")); !errors.Is(err, store.ErrProjectNotFound) {
		t.Fatalf("key of a deleted project: %v", err)
	}

	page, err := owned.ListProjectKeysByAge(ctx, project, 10, store.AgeCursor{})
	must(t, err)
	// exp's creation was moved two hours back: it lists first.
	if len(page) != 2 || page[0].ID != exp.ID || page[1].ID != key.ID {
		t.Fatalf("listed %d keys", len(page))
	}
}

// TestProjectKeyChangesNotify: a key's creation and revocation each queue
// keys_changed with the key's id when they commit.
func TestProjectKeyChangesNotify(t *testing.T) {
	st, ctx := storetest.Parallel(t)
	owned := storetest.Owner(t, st)
	_, project := newProject(t, ctx, owned)
	heard := make(chan string, 16)
	lctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- st.ListenEvents(lctx, func(p string) { heard <- p }) }()
	t.Cleanup(func() { stop(); <-done })
	// The listener is up once it hears a probe of its own.
	deadline := time.After(10 * time.Second)
	for probing := true; probing; {
		_, err := owned.Pool().Exec(ctx, `SELECT pg_notify('berth_events', 'probe:x')`)
		must(t, err)
		select {
		case <-heard:
			probing = false
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("listener never heard its probe")
		}
	}
	want := func(id uuid.UUID) {
		t.Helper()
		for {
			select {
			case p := <-heard:
				if p == store.KeysChangedEvent+":"+id.String() {
					return
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("no %s for %s", store.KeysChangedEvent, id)
			}
		}
	}
	key, _, err := owned.CreateProjectKey(ctx, newKey(project, "n"))
	must(t, err)
	want(key.ID)
	_, err = owned.RevokeProjectKey(ctx, project, key.ID)
	must(t, err)
	want(key.ID)
}
