package e2b_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/e2b/e2btest"
	"berth.dev/sandbox/errdefs"
)

// reason is err's refusal reason, "" when it is none.
func reason(err error) string {
	if r, ok := errdefs.AsRefusal(err); ok {
		return r.Reason
	}
	return ""
}

// TestStatusMapping: every E2B status maps to one errdefs class (and
// reason, for refusals) per operation, with E2B's body never read into
// the error; a complete refusal of a create is its absence receipt, a
// 5xx is unknown.
func TestStatusMapping(t *testing.T) {
	f := e2btest.Start(t)
	p := f.Provider(t)
	existing := sandboxRef()
	create(t, p, existing)
	for _, c := range []struct {
		op      string
		call    string
		status  int
		class   error
		reason  string
		receipt bool
	}{
		{"create", "create", 400, errdefs.ErrInvalid, "", true},
		{"create", "create", 401, errdefs.ErrFailedPrecondition, "credential_rejected", true},
		{"create", "create", 403, errdefs.ErrFailedPrecondition, "credential_rejected", true},
		{"create", "create", 404, errdefs.ErrInvalid, "", true},
		{"create", "create", 409, errdefs.ErrInvalid, "", true},
		{"create", "create", 429, errdefs.ErrFailedPrecondition, "vendor_rate_limited", true},
		{"create", "create", 500, errdefs.ErrComputeUnconfirmed, "", false},
		{"create", "create", 503, errdefs.ErrComputeUnconfirmed, "", false},
		{"create", "list", 401, errdefs.ErrFailedPrecondition, "credential_rejected", true},
		{"create", "list", 429, errdefs.ErrObservationUnavailable, "", false},
		{"getinfo", "list", 401, errdefs.ErrFailedPrecondition, "credential_rejected", false},
		{"getinfo", "list", 403, errdefs.ErrFailedPrecondition, "credential_rejected", false},
		{"getinfo", "list", 429, errdefs.ErrObservationUnavailable, "", false},
		{"getinfo", "list", 500, errdefs.ErrObservationUnavailable, "", false},
		{"getinfo", "get", 404, errdefs.ErrNotFound, "", false},
		{"getinfo", "get", 503, errdefs.ErrObservationUnavailable, "", false},
		{"renew", "timeout", 400, errdefs.ErrFailedPrecondition, "lease_at_maximum", false},
		{"renew", "timeout", 401, errdefs.ErrFailedPrecondition, "credential_rejected", false},
		{"renew", "timeout", 404, errdefs.ErrNotFound, "", false},
		{"renew", "timeout", 409, errdefs.ErrFailedPrecondition, "sandbox_not_running", false},
		{"renew", "timeout", 429, errdefs.ErrComputeUnconfirmed, "", false},
		{"renew", "timeout", 500, errdefs.ErrComputeUnconfirmed, "", false},
		{"kill", "kill", 401, errdefs.ErrFailedPrecondition, "credential_rejected", false},
		{"kill", "kill", 500, errdefs.ErrComputeUnconfirmed, "", false},
		{"kill", "list", 403, errdefs.ErrFailedPrecondition, "credential_rejected", false},
		{"run", "start", 401, errdefs.ErrCommandUnconfirmed, "", false},
		{"run", "start", 502, errdefs.ErrCommandUnconfirmed, "", false},
	} {
		var err error
		var info sandbox.Info
		ref := sandboxRef()
		if c.op == "kill" {
			ref = sandboxRef()
			create(t, p, ref)
		}
		f.ArmStatus(c.call, c.status)
		switch c.op {
		case "create":
			info, err = p.Create(ctxT(t), contracttest.CreateRequest(ref, sandbox.Resources{}))
		case "getinfo":
			ref = existing
			info, err = p.GetInfo(ctxT(t), ref)
		case "renew":
			ref = existing
			info, err = p.Renew(ctxT(t), ref)
		case "kill":
			err = p.Kill(ctxT(t), sandbox.KillRequest{Reference: ref})
		case "run":
			ref = existing
			_, err = p.RunCommand(ctxT(t), ref, sandbox.Command{Args: []string{"/bin/true"}})
		}
		if !errors.Is(err, c.class) || reason(err) != c.reason {
			t.Errorf("%s with %s answering %d: err = %v (reason %q), want %v (reason %q)",
				c.op, c.call, c.status, err, reason(err), c.class, c.reason)
		}
		if got := info.IsAbsenceReceipt(ref); got != c.receipt {
			t.Errorf("%s with %s answering %d: absence receipt %v, want %v", c.op, c.call, c.status, got, c.receipt)
		}
		for _, s := range f.Sensitive() {
			if err != nil && strings.Contains(err.Error(), s) {
				t.Errorf("%s with %d: error shows %q", c.op, c.status, s)
			}
		}
	}
	f.Advance(time.Second)
	checkNoReplay(t, f)
}

// TestRenewReportsE2BsClamp: E2B clamps a lease at the plan's maximum
// sandbox lifetime; Renew reports the endAt E2B holds, never the one it
// asked for.
func TestRenewReportsE2BsClamp(t *testing.T) {
	f := e2btest.Start(t)
	f.MaxLength = 20 * time.Minute
	p := f.Provider(t)
	ref := sandboxRef()
	create(t, p, ref)
	start := only(t, f).StartedAt
	f.Advance(10 * time.Minute)
	info, err := p.Renew(ctxT(t), ref)
	if err != nil || !info.LeaseExpiry.Equal(start.Add(20*time.Minute)) {
		t.Fatalf("Renew = %+v, %v; want E2B's clamped endAt %v", info, err, start.Add(20*time.Minute))
	}
}

// TestConcurrentReferences: calls about different References run side by
// side (the fence orders only one Reference's calls) and each allocation
// gets exactly one sandbox and one create POST.
func TestConcurrentReferences(t *testing.T) {
	f := e2btest.Start(t)
	p := f.Provider(t)
	refs := make([]sandbox.Reference, 8)
	errs := make(chan error, len(refs))
	for i := range refs {
		refs[i] = sandboxRef()
		go func(ref sandbox.Reference) {
			info, err := p.Create(ctxT(t), contracttest.CreateRequest(ref, sandbox.Resources{}))
			if err == nil && !info.IsSettledRunning(ref) {
				err = errors.New("not settled running")
			}
			if err == nil {
				var res sandbox.CommandResult
				res, err = p.RunCommand(ctxT(t), ref, sandbox.Command{Args: []string{"/bin/echo", ref.AllocationID}})
				if err == nil && string(res.Stdout) != ref.AllocationID+"\n" {
					err = errors.New("output of another command")
				}
			}
			errs <- err
		}(refs[i])
	}
	for range refs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := len(f.Sandboxes()); n != len(refs) {
		t.Fatalf("%d sandboxes for %d allocations", n, len(refs))
	}
	if p.Fence().Active() != 0 {
		t.Fatal("calls still counted after every caller returned")
	}
	checkNoReplay(t, f)
}
