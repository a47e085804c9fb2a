package e2b_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/e2b"
)

// TestLiveE2B is the opt-in live acceptance against a real E2B account:
// it skips unless E2B_API_KEY and E2B_TEMPLATE (a Runtime template, see
// README.md) are set, and CI never sets them. It creates one sandbox,
// observes, renews, runs a command and kills it, and proves what the
// fixture cannot: E2B's real wire format, TLS through its proxy, endAt
// moving on Renew, and removal. The Runtime it starts cannot reach the
// test's fake Core URL; only its start is checked.
func TestLiveE2B(t *testing.T) {
	key, template := os.Getenv("E2B_API_KEY"), os.Getenv("E2B_TEMPLATE")
	if key == "" || template == "" {
		t.Skip("live E2B acceptance: set E2B_API_KEY and E2B_TEMPLATE to run it (never in CI)")
	}
	pub, _ := json.Marshal(map[string]any{"template": template, "lease_seconds": 300})
	cred, _ := json.Marshal(map[string]string{"api_key": key})
	n, err := e2b.Configuration().DecodeInput(sandbox.ConfigurationInput{Public: pub, Credential: sandbox.NewCredential(cred)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e2b.New(e2b.Options{Config: n.(e2b.Config), InstallationID: uuid.NewString(), StateDirectory: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := p.Probe(ctx); err != nil {
		t.Fatalf("probe: %v", err)
	}
	ref := contracttest.NewReference()
	t.Cleanup(func() {
		kctx, kcancel := context.WithTimeout(context.Background(), time.Minute)
		defer kcancel()
		if err := p.Kill(kctx, sandbox.KillRequest{Reference: ref}); err != nil {
			t.Errorf("cleanup Kill: %v", err)
		}
	})
	info, err := p.Create(ctx, contracttest.CreateRequest(ref, sandbox.Resources{}))
	if err != nil || !info.IsSettledRunning(ref) {
		t.Fatalf("Create = %+v, %v", info, err)
	}
	got, err := p.GetInfo(ctx, ref)
	if err != nil || got.ProviderID != info.ProviderID || got.LeaseExpiry.IsZero() {
		t.Fatalf("GetInfo = %+v, %v", got, err)
	}
	renewed, err := p.Renew(ctx, ref)
	if err != nil || !renewed.LeaseExpiry.After(time.Now().Add(4*time.Minute)) {
		t.Fatalf("Renew = %+v, %v", renewed, err)
	}
	res, err := p.RunCommand(ctx, ref, sandbox.Command{Args: []string{"/bin/cat"}, Stdin: []byte{'o', 'k', 0xff}})
	if err != nil || string(res.Stdout) != "ok\xff" || res.ExitCode != 0 {
		t.Fatalf("RunCommand = %+v, %v", res, err)
	}
	if err := p.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if info, err := p.GetInfo(ctx, ref); err != nil || !info.IsAbsenceReceipt(ref) {
		t.Fatalf("GetInfo after Kill = %+v, %v", info, err)
	}
}
