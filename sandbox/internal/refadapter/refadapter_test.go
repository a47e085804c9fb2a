package refadapter_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/internal/refadapter"
	"berth.dev/sandbox/internal/refnative"
)

// These are the reference adapter's own lifecycle tests: what a correct
// adapter does when nothing fails.

func newAdapter(t *testing.T) (*refnative.Server, *refadapter.Provider) {
	srv := refnative.Start(t)
	return srv, refadapter.New(srv.URL, "inst-1", refadapter.NewClient())
}

func TestLifecycle(t *testing.T) {
	srv, p := newAdapter(t)
	ctx := context.Background()
	ref := contracttest.NewReference()
	req := contracttest.CreateRequest(ref, sandbox.Resources{})
	info, err := p.Create(ctx, req)
	if err != nil || !info.IsSettledRunning(ref) || !info.CreateSettled {
		t.Fatalf("Create = %+v, %v", info, err)
	}
	res, ok := srv.Get(p.Name(ref))
	if !ok || !bytes.Contains(res.Bootstrap, []byte(req.Bootstrap.Credential.Reveal())) {
		t.Fatal("bootstrap file not delivered")
	}
	srv.ResetCalls()
	if _, err := p.Create(ctx, req); !errdefs.IsExists(err) {
		t.Fatalf("second Create: %v", err)
	}
	if calls := srv.Calls(); len(calls) != 1 || calls[0] != refnative.CallInspect {
		t.Fatalf("second Create made calls %v", calls)
	}
	for _, op := range []func(context.Context, sandbox.Reference) (sandbox.Info, error){p.GetInfo, p.Renew} {
		if got, err := op(ctx, ref); err != nil || got != info {
			t.Fatalf("observe = %+v, %v; want %+v", got, err, info)
		}
	}
	out, err := p.RunCommand(ctx, ref, sandbox.Command{Args: []string{"cat"}, Stdin: []byte("confidential")})
	if err != nil || string(out.Stdout) != "confidential" || out.ExitCode != 0 {
		t.Fatalf("cat = %+v, %v", out, err)
	}
	out, err = p.RunCommand(ctx, ref, sandbox.Command{Args: []string{"fail", "3", "boom"}})
	if err != nil || out.ExitCode != 3 || string(out.Stderr) != "boom" {
		t.Fatalf("fail = %+v, %v", out, err)
	}
	out, err = p.RunCommand(ctx, ref, sandbox.Command{Args: []string{"echo", strings.Repeat("x", 100)}, OutputLimit: 10})
	if err != nil || len(out.Stdout) != 10 || !out.StdoutTruncated {
		t.Fatalf("bounded output = %+v, %v", out, err)
	}
	obs, err := p.Observe(ctx, ref)
	if err != nil || obs.Reference != ref || obs.MemoryBytes == 0 {
		t.Fatalf("Observe = %+v, %v", obs, err)
	}
	if err := p.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if srv.Len() != 0 {
		t.Fatal("resource left after Kill")
	}
	if err := p.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
		t.Fatalf("second Kill: %v", err)
	}
	if _, err := p.GetInfo(ctx, ref); !errdefs.IsNotFound(err) {
		t.Fatalf("GetInfo after Kill: %v", err)
	}
}

func TestOtherInstallationsResourcesAreForeign(t *testing.T) {
	srv, p := newAdapter(t)
	ctx := context.Background()
	ref := contracttest.NewReference()
	if _, err := p.Create(ctx, contracttest.CreateRequest(ref, sandbox.Resources{})); err != nil {
		t.Fatal(err)
	}
	other := refadapter.New(srv.URL, "inst-2", refadapter.NewClient())
	// Same reference, other installation: another name, so not found.
	if _, err := other.GetInfo(ctx, ref); !errdefs.IsNotFound(err) {
		t.Fatalf("other installation sees the resource: %v", err)
	}
}

func TestBadInputIsRejectedBeforeNativeCalls(t *testing.T) {
	srv, p := newAdapter(t)
	ctx := context.Background()
	ref := contracttest.NewReference()
	bad := ref
	bad.TenantID = "TENANT"
	req := contracttest.CreateRequest(ref, sandbox.Resources{})
	req.Bootstrap.Credential = runtimebootstrap.NewSecret("short")
	if _, err := p.Create(ctx, req); !errdefs.IsInvalid(err) || strings.Contains(err.Error(), "short") {
		t.Errorf("bad bootstrap: %v", err)
	}
	if _, err := p.GetInfo(ctx, bad); !errdefs.IsInvalid(err) {
		t.Errorf("bad reference: %v", err)
	}
	if _, err := p.RunCommand(ctx, ref, sandbox.Command{}); !errdefs.IsInvalid(err) {
		t.Errorf("bad command: %v", err)
	}
	if calls := srv.Calls(); len(calls) != 0 {
		t.Errorf("native calls for bad input: %v", calls)
	}
}
