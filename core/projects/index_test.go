package projects_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/events"
	"berth.dev/core/projects"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// newKey creates a key of project in st and returns its token.
func newKey(t *testing.T, ctx context.Context, st *storetest.Store, project uuid.UUID) (projects.KeyToken, uuid.UUID) {
	t.Helper()
	tok, id, digest, err := projects.NewKeyToken()
	must(t, err)
	_, _, err = st.CreateProjectKey(ctx, store.NewProjectKey{RequestID: uuid.New(), ID: id, ProjectID: project, Digest: digest[:], DisplayName: "k"})
	must(t, err)
	return tok, id
}

// TestKeyIndexChecksAndVerifies: Check accepts a live key's exact token
// from the loaded copy only, and Verify, asking the database, refuses a
// revoked key at once once the index heard of it, while Check's copy
// keeps it until the next load.
func TestKeyIndexChecksAndVerifies(t *testing.T) {
	st, ctx := storetest.Parallel(t)
	tenant, _, err := st.CreateTenant(ctx, uuid.New(), uuid.New(), "t")
	must(t, err)
	p, _, err := st.CreateProject(ctx, uuid.New(), uuid.New(), tenant.ID, "p")
	must(t, err)
	x := projects.NewKeyIndex(st.Reader, time.Now)
	tok, id := newKey(t, ctx, st, p.ID)
	if _, ok := x.Check(tok.Reveal()); ok {
		t.Fatal("Check accepted a key the index has not loaded")
	}
	must(t, x.Load(ctx))
	k, ok := x.Check(tok.Reveal())
	if !ok || k != (projects.Key{ID: id, ProjectID: p.ID, TenantID: tenant.ID}) {
		t.Fatalf("Check = %+v, %v", k, ok)
	}
	other, _, _, err := projects.NewKeyToken()
	must(t, err)
	s := tok.Reveal()
	wrongSecret := s[:len(s)-43] + other.Reveal()[len(s)-43:]
	for name, bad := range map[string]string{"wrong secret": wrongSecret, "unknown id": other.Reveal(), "malformed": s + "x"} {
		if _, ok := x.Check(bad); ok {
			t.Errorf("Check accepted the %s", name)
		}
	}
	v, err := x.Verify(ctx, id)
	if err != nil || v != k {
		t.Fatalf("Verify = %+v, %v", v, err)
	}
	if _, err := x.Verify(ctx, uuid.New()); !errors.Is(err, projects.ErrKeyNotLive) {
		t.Fatalf("Verify of an unknown key: %v", err)
	}

	// Revoked: the running index hears keys_changed, forgets its cached
	// answer and reloads.
	bus := events.New()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { x.Run(rctx, bus, slog.New(slog.DiscardHandler)); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	_, err = st.RevokeProjectKey(ctx, p.ID, id)
	must(t, err)
	bus.Publish(events.Event{Kind: events.KeysChanged, ID: id})
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, checked := x.Check(tok.Reveal())
		_, verr := x.Verify(ctx, id)
		if !checked && errors.Is(verr, projects.ErrKeyNotLive) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after revocation: Check %v, Verify %v", checked, verr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestVerifyDecidesOnTheDatabaseClock: a key Check still accepts (its
// expiry, as the index loaded it, is an hour away) is refused by Verify
// once the database says it expired, with no Go clock moved.
func TestVerifyDecidesOnTheDatabaseClock(t *testing.T) {
	st, ctx := storetest.Parallel(t)
	tenant, _, err := st.CreateTenant(ctx, uuid.New(), uuid.New(), "t")
	must(t, err)
	p, _, err := st.CreateProject(ctx, uuid.New(), uuid.New(), tenant.ID, "p")
	must(t, err)
	tok, id, digest, err := projects.NewKeyToken()
	must(t, err)
	hour := time.Now().Add(time.Hour)
	_, _, err = st.CreateProjectKey(ctx, store.NewProjectKey{RequestID: uuid.New(), ID: id, ProjectID: p.ID, Digest: digest[:], ExpireAt: &hour})
	must(t, err)
	x := projects.NewKeyIndex(st.Reader, time.Now)
	must(t, x.Load(ctx))
	_, err = st.Pool().Exec(ctx, `UPDATE project_keys SET created_at = now() - interval '2 hours', expire_at = now() - interval '1 second' WHERE id = $1`, id)
	must(t, err)
	if _, ok := x.Check(tok.Reveal()); !ok {
		t.Fatal("Check refused a key its copy holds as live")
	}
	if _, err := x.Verify(ctx, id); !errors.Is(err, projects.ErrKeyNotLive) {
		t.Fatalf("Verify of an expired key: %v", err)
	}
	// Check's own early refusal uses Core's clock on the loaded expiry.
	late := projects.NewKeyIndex(st.Reader, func() time.Time { return hour.Add(time.Second) })
	_, err = st.Pool().Exec(ctx, `UPDATE project_keys SET expire_at = $2 WHERE id = $1`, id, hour)
	must(t, err)
	must(t, late.Load(ctx))
	if _, ok := late.Check(tok.Reveal()); ok {
		t.Fatal("Check accepted a key past its loaded expiry")
	}
}

// TestCreatedKeyAuthenticatesAtOnce: a key Keys creates is in the index
// it loads into before its token is returned, so the token's first call
// on this Core is not refused while the keys_changed notification is on
// its way; without LoadsInto the index would refuse it until a reload.
func TestCreatedKeyAuthenticatesAtOnce(t *testing.T) {
	st, ctx := storetest.Parallel(t)
	tenant, _, err := st.CreateTenant(ctx, uuid.New(), uuid.New(), "t")
	must(t, err)
	p, _, err := st.CreateProject(ctx, uuid.New(), uuid.New(), tenant.ID, "p")
	must(t, err)
	for _, loads := range []bool{false, true} {
		x := projects.NewKeyIndex(st.Reader, time.Now)
		must(t, x.Load(ctx))
		keys, err := projects.NewKeys(st)
		must(t, err)
		if loads {
			keys.LoadsInto(x)
		}
		key, tok, err := keys.Create(ctx, projects.NewKey{RequestID: uuid.New(), TenantID: tenant.ID, ProjectID: p.ID})
		must(t, err)
		k, ok := x.Check(tok.Reveal())
		if ok != loads || (loads && k.ID != key.ID) {
			t.Errorf("LoadsInto %v: Check of the new token = %+v, %v", loads, k, ok)
		}
	}
}
