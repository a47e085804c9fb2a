package e2b_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/e2b"
)

// TestLiveE2B is the opt-in live acceptance against a real E2B account:
// it skips unless E2B_API_KEY and E2B_TEMPLATE (a Runtime template, see
// README.md) are set, and CI never sets them. It creates one sandbox,
// observes, renews, runs a command and kills it, and proves what the
// fixture cannot: E2B's real wire format, TLS through its proxy, endAt
// moving on Renew, removal, and that the template built from deploy/e2b
// gives a sandbox the Runtime's layout (liveTemplateLayout). The Runtime
// it starts cannot reach the test's fake Core URL; only its start is
// checked. The key is read from the environment only and never printed:
// it is a sandbox.Credential, and no error of the adapter carries it (make
// check-e2b-provider also scans the output for it).
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
	liveTemplateLayout(ctx, t, p, ref)
	if err := p.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if info, err := p.GetInfo(ctx, ref); err != nil || !info.IsAbsenceReceipt(ref) {
		t.Fatalf("GetInfo after Kill = %+v, %v", info, err)
	}
}

// liveTemplateLayout checks, inside the live sandbox, what
// deploy/e2b/e2b.Dockerfile promises and test/dist's
// TestE2BTemplateMatchesTheRuntimeImage checks only on paper: commands
// run as the Runtime user 1000, whose home (the bootstrap file's folder)
// is private, the workspace is its own, and berth-runtime is root's and
// executable at its path; coreutils' install is where the adapter runs it.
func liveTemplateLayout(ctx context.Context, t *testing.T, p *e2b.Provider, ref sandbox.Reference) {
	t.Helper()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"/usr/bin/id", "-u", "-n"}, e2b.RuntimeUser + "\n"},
		{[]string{"/usr/bin/id", "-u"}, "1000\n"},
		{[]string{"/usr/bin/stat", "-c", "%n %a %u:%g", "/home/runtime", "/workspace", "/environment/workspace", runtimebootstrap.BinaryPath, e2b.InstallPath},
			"/home/runtime 700 1000:1000\n/workspace 755 1000:1000\n/environment/workspace 755 1000:1000\n" +
				runtimebootstrap.BinaryPath + " 755 0:0\n" + e2b.InstallPath + " 755 0:0\n"},
	} {
		res, err := p.RunCommand(ctx, ref, sandbox.Command{Args: c.args})
		if err != nil || res.ExitCode != 0 || string(res.Stdout) != c.want {
			t.Errorf("%q in the template's sandbox = %q (exit %d), %v; want %q", c.args, res.Stdout, res.ExitCode, err, c.want)
		}
	}
}
