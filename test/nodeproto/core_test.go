package nodeproto

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/test/internal/stack"
)

// TestCoreClaimsOnceAndHoldsTheLease: Core claims the installation once
// and a new owner epoch per start; a second Core on the same database
// waits for the execution lease and takes over, with a higher epoch, when
// the first stops.
func TestCoreClaimsOnceAndHoldsTheLease(t *testing.T) {
	dsn := storetestDatabase(t)
	first := stack.StartCore(t, dsn, stack.CoreStateDir(t), true)
	cc, ctx := first.AdminClient(t)
	inst1, err := adminv1.NewInstallationServiceClient(cc).GetInstallation(ctx, &adminv1.GetInstallationRequest{Name: "installation"})
	if err != nil {
		t.Fatalf("GetInstallation: %v", err)
	}
	if _, err := adminv1.NewInstallationServiceClient(cc).GetInstallation(context.Background(), &adminv1.GetInstallationRequest{Name: "installation"}); err == nil {
		t.Fatal("admin call without the token succeeded")
	}
	// Every Core of an installation holds the same master key (the CA key
	// is sealed under it); the operator gives it to the standby.
	standby := stack.CoreStateDir(t)
	key, err := os.ReadFile(filepath.Join(first.StateDir, "master.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(standby, "master.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	second := stack.StartCore(t, dsn, standby, false)
	time.Sleep(2 * time.Second)
	select {
	case <-second.Serving:
		t.Fatalf("a second Core served while the first held the lease:\n%s", second.Logs())
	default:
	}
	if !strings.Contains(second.Logs(), "another berth-core holds the execution lease") {
		t.Fatalf("the second Core does not say it waits:\n%s", second.Logs())
	}
	first.Stop()
	second.WaitServing(30 * time.Second)
	cc2, ctx2 := second.AdminClient(t)
	inst2, err := adminv1.NewInstallationServiceClient(cc2).GetInstallation(ctx2, &adminv1.GetInstallationRequest{Name: "installation"})
	if err != nil {
		t.Fatal(err)
	}
	i1, i2 := inst1.GetInstallation(), inst2.GetInstallation()
	if i1.GetId() != i2.GetId() || i2.GetOwnerEpoch() <= i1.GetOwnerEpoch() {
		t.Fatalf("installation %s epoch %d, then %s epoch %d", i1.GetId(), i1.GetOwnerEpoch(), i2.GetId(), i2.GetOwnerEpoch())
	}
	if i1.GetCaFingerprint() == "" || i1.GetCaFingerprint() != i2.GetCaFingerprint() {
		t.Fatalf("CA fingerprint %q then %q: the CA must be created once and reopened", i1.GetCaFingerprint(), i2.GetCaFingerprint())
	}
	for _, c := range []*stack.Core{first, second} {
		tok, _ := os.ReadFile(filepath.Join(c.StateDir, "admin-token"))
		if strings.Contains(c.Logs(), strings.TrimSpace(string(tok))) || strings.Contains(c.Logs(), "password") {
			t.Fatal("a secret reached Core's log")
		}
	}
}

// TestCoreWithAnotherMasterKeyRefusesToStart: the installation CA's key is
// sealed under the master key; a Core given another key stops with a clear
// error instead of minting a second CA.
func TestCoreWithAnotherMasterKeyRefusesToStart(t *testing.T) {
	dsn := storetestDatabase(t)
	first := stack.StartCore(t, dsn, stack.CoreStateDir(t), true)
	first.Stop()
	other := stack.StartCore(t, dsn, stack.CoreStateDir(t), false)
	select {
	case <-other.Exited:
	case <-time.After(30 * time.Second):
		t.Fatal("a Core with another master key kept running")
	}
	if !strings.Contains(other.Logs(), "installation CA key: sealed value does not open") {
		t.Fatalf("unclear refusal:\n%s", other.Logs())
	}
}
