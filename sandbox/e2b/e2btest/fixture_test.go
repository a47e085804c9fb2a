package e2btest_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/e2b"
	"berth.dev/sandbox/e2b/e2btest"
	"berth.dev/sandbox/errdefs"
)

// TestKeysOfTeams: a second key of a team sees the team's sandbox, a key
// of another team sees nothing of it; a revoked key is answered 401 (the
// adapter's credential_rejected) while the sandbox runs on, stays among
// Sensitive, and once restored sees the sandbox again.
func TestKeysOfTeams(t *testing.T) {
	f := e2btest.Start(t)
	opts := f.Options(t)
	first, err := e2b.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ref := contracttest.NewReference()
	created, err := first.Create(ctx, contracttest.CreateRequest(ref, sandbox.Resources{}))
	if err != nil || !created.IsSettledRunning(ref) {
		t.Fatalf("Create = %+v, %v", created, err)
	}
	with := func(key string) *e2b.Provider {
		o := opts
		o.Config = f.Config(t, key)
		p, err := e2b.New(o)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	second := f.AddKey("team-a")
	sees := func(p *e2b.Provider) error {
		info, err := p.GetInfo(ctx, ref)
		if err == nil && info.ProviderID != created.ProviderID {
			t.Fatalf("GetInfo = %+v, want the sandbox %s", info, created.ProviderID)
		}
		return err
	}
	if err := sees(with(second)); err != nil {
		t.Fatalf("the team's second key: %v", err)
	}
	if info, err := with(f.AddTeam("team-b")).GetInfo(ctx, ref); err != nil || !info.IsAbsenceReceipt(ref) {
		t.Fatalf("another team's key: %+v, %v; want nothing seen", info, err)
	}

	f.RevokeKey(second)
	err = sees(with(second))
	if r, ok := errdefs.AsRefusal(err); !ok || r.Reason != "credential_rejected" {
		t.Fatalf("the revoked key: %v, want credential_rejected", err)
	}
	if !slices.Contains(f.Sensitive(), second) {
		t.Fatal("a revoked key left Sensitive")
	}
	if err := sees(first); err != nil {
		t.Fatalf("the first key after the second's revocation: %v", err)
	}
	f.RestoreKey(second)
	if err := sees(with(second)); err != nil {
		t.Fatalf("the restored key: %v", err)
	}
}
