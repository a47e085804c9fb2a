package e2b_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/e2b"
	"berth.dev/sandbox/e2b/e2btest"
	"berth.dev/sandbox/errdefs"
)

// TestFenceHoldsATimedOutCreate: a Create whose caller gave up while its
// POST was held returns at once with an unknown outcome, but the call
// keeps the fence's count and the Reference's turn until its HTTP
// exchange ended: the next call about the Reference waits, and Exclude
// cannot complete. Once E2B answers, the detached Create finishes, the
// fence is idle, and the waiting GetInfo observes its sandbox.
func TestFenceHoldsATimedOutCreate(t *testing.T) {
	f := e2btest.Start(t)
	p := f.Provider(t)
	ref := sandboxRef()
	f.Arm("create", e2btest.FaultHang, nil)
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		info sandbox.Info
		err  error
	}
	created := make(chan result, 1)
	go func() {
		info, err := p.Create(ctx, contracttest.CreateRequest(ref, sandbox.Resources{}))
		created <- result{info, err}
	}()
	waitFor(t, func() bool { return slices.Contains(names(f.Calls()), "create") })
	cancel()
	select {
	case r := <-created:
		if !errdefs.IsComputeUnconfirmed(r.err) || r.info.CreateSettled {
			t.Fatalf("given-up Create = %+v, %v; want an unknown outcome", r.info, r.err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the caller was held past its cancellation")
	}
	if n := p.Fence().Active(); n != 1 {
		t.Fatalf("Fence.Active() = %d while the POST is held, want 1", n)
	}
	xctx, xcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	if _, err := p.Fence().Exclude(xctx); err == nil {
		t.Fatal("Exclude completed while a detached Create still ran")
	}
	xcancel()
	observed := make(chan result, 1)
	go func() {
		info, err := p.GetInfo(ctxT(t), ref)
		observed <- result{info, err}
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case r := <-observed:
		t.Fatalf("GetInfo ran beside the held Create: %+v, %v", r.info, r.err)
	default:
	}
	f.Release()
	waitFor(t, func() bool { return p.Fence().Active() == 0 })
	r := <-observed
	if r.err != nil || r.info.ProviderID == "" || !r.info.CreateSettled {
		t.Fatalf("GetInfo after the Create = %+v, %v", r.info, r.err)
	}
	checkNoReplay(t, f)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAnotherTeamsKey: a key of another E2B team is accepted by E2B but
// sees none of the installation's sandboxes: VerifyCredential refuses it
// (reads only), accepts the current team's key, refuses a rejected key;
// an adapter holding the other key touches nothing of the first team.
func TestAnotherTeamsKey(t *testing.T) {
	f := e2btest.Start(t)
	opts := f.Options(t)
	p, err := e2b.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ref := sandboxRef()
	create(t, p, ref)
	otherKey := f.AddTeam("team-b")
	f.ResetCalls()
	err = p.VerifyCredential(ctxT(t), f.Config(t, otherKey))
	if r, ok := errdefs.AsRefusal(err); !ok || r.Reason != "credential_other_namespace" || !errdefs.IsFailedPrecondition(err) {
		t.Fatalf("VerifyCredential of another team's key = %v", err)
	}
	if err := p.VerifyCredential(ctxT(t), f.Config(t, f.Key)); err != nil {
		t.Fatalf("VerifyCredential of the team's key = %v", err)
	}
	if r, ok := errdefs.AsRefusal(p.VerifyCredential(ctxT(t), f.Config(t, "e2b_revoked"))); !ok || r.Reason != "credential_rejected" {
		t.Fatal("VerifyCredential accepted a rejected key")
	}
	for _, c := range f.Calls() {
		if c.Mutating {
			t.Fatalf("VerifyCredential made mutating call %s", c.Name)
		}
	}
	otherOpts := opts
	otherOpts.Config = f.Config(t, otherKey)
	otherOpts.StateDirectory = t.TempDir()
	other, err := e2b.New(otherOpts)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Kill(ctxT(t), sandbox.KillRequest{Reference: ref}); err != nil {
		t.Fatalf("Kill with the other key = %v", err)
	}
	if info, err := p.GetInfo(ctxT(t), ref); err != nil || !info.IsSettledRunning(ref) {
		t.Fatalf("the first team's sandbox after the other key's Kill = %+v, %v", info, err)
	}
}

// TestSecretsStayOut: the API key, every envd token, the bootstrap
// credential and a command's stdin appear in no error, no log line of
// the adapter (slog captured at debug), no argv of any process the
// fixture ran, and no file of the adapter's state directory, across
// successes and faults.
func TestSecretsStayOut(t *testing.T) {
	f := e2btest.Start(t)
	var logs bytes.Buffer
	opts := f.Options(t)
	opts.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p, err := e2b.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	var errs []error
	note := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var secrets []string
	ref := sandboxRef()
	req := contracttest.CreateRequest(ref, sandbox.Resources{})
	secrets = append(secrets, req.Bootstrap.Credential.Reveal())
	_, err = p.Create(ctxT(t), req)
	note(err)
	stdin := "stdin-secret-" + sandboxRef().AllocationID
	secrets = append(secrets, stdin)
	_, err = p.RunCommand(ctxT(t), ref, sandbox.Command{Args: []string{"/bin/cat"}, Stdin: []byte(stdin)})
	note(err)
	for _, fault := range []struct {
		call  string
		fault contracttest.Fault
	}{{"create", contracttest.FaultTransport}, {"create", e2btest.FaultCommit500}, {"start", e2btest.FaultLostAnswer}} {
		f.Arm(fault.call, fault.fault, nil)
		r := sandboxRef()
		fr := contracttest.CreateRequest(r, sandbox.Resources{})
		secrets = append(secrets, fr.Bootstrap.Credential.Reveal())
		_, err := p.Create(ctxT(t), fr)
		note(err)
		_, err = p.GetInfo(ctxT(t), r)
		note(err)
	}
	f.Arm("start", e2btest.FaultLostAnswer, nil)
	_, err = p.RunCommand(ctxT(t), ref, sandbox.Command{Args: []string{"/bin/cat"}, Stdin: []byte(stdin)})
	note(err)
	f.Arm("kill", contracttest.FaultCleanupFailure, nil)
	note(p.Kill(ctxT(t), sandbox.KillRequest{Reference: ref}))
	note(p.VerifyCredential(ctxT(t), f.Config(t, "e2b_revoked_hunter2")))
	secrets = append(secrets, f.Key, "e2b_revoked_hunter2")
	secrets = append(secrets, f.Tokens()...)
	if len(errs) < 5 || logs.Len() == 0 {
		t.Fatalf("the scenario produced %d errors and %d log bytes: not exercised", len(errs), logs.Len())
	}
	var state bytes.Buffer
	_ = filepath.Walk(opts.StateDirectory, func(path string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			data, _ := os.ReadFile(path)
			state.Write(data)
		}
		return nil
	})
	argv := strings.Join(flatten(f.Argv()), "\x00")
	for _, s := range secrets {
		if s == "" {
			t.Fatal("empty secret")
		}
		for _, err := range errs {
			if strings.Contains(err.Error(), s) {
				t.Errorf("error shows a secret: %v", err)
			}
		}
		if strings.Contains(logs.String(), s) {
			t.Errorf("a log line shows a secret")
		}
		if strings.Contains(argv, s) {
			t.Errorf("an argv shows a secret")
		}
		if strings.Contains(state.String(), s) {
			t.Errorf("the state directory holds a secret")
		}
	}
	for _, s := range f.Sensitive() {
		for _, err := range errs {
			if strings.Contains(err.Error(), s) {
				t.Errorf("error shows native detail %q: %v", s, err)
			}
		}
	}
	checkNoReplay(t, f)
}

func testCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "berth test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// oneShotProxy forwards its first connection to a target and then stops
// listening, so every later request is refused before it is written.
type oneShotProxy struct{ ln net.Listener }

func newOneShotProxy(t *testing.T, target string) *oneShotProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(target)
	go func() {
		c, err := ln.Accept()
		_ = ln.Close()
		if err != nil {
			return
		}
		d, err := net.Dial("tcp", u.Host)
		if err != nil {
			_ = c.Close()
			return
		}
		go func() {
			_, _ = io.Copy(d, c)
			_ = d.(*net.TCPConn).CloseWrite()
		}()
		_, _ = io.Copy(c, d)
		_ = c.Close()
		_ = d.Close()
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return &oneShotProxy{ln: ln}
}

func (o *oneShotProxy) URL() string { return "http://" + o.ln.Addr().String() }

// e2bConfigAt is f's configuration with the control plane at apiURL.
func e2bConfigAt(t *testing.T, f *e2btest.Fixture, apiURL string) e2b.Config {
	t.Helper()
	pub, _ := json.Marshal(map[string]string{"api_url": apiURL, "sandbox_url": f.URL, "template": e2btest.Template})
	n, err := e2b.Configuration().DecodeInput(sandbox.ConfigurationInput{Public: pub, Credential: e2btest.Credential(f.Key)})
	if err != nil {
		t.Fatal(err)
	}
	return n.(e2b.Config)
}
