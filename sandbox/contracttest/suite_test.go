package contracttest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/internal/refnative"
)

// check runs one case with the suite's violations collected.
func check(h contracttest.Harness, c contracttest.Case) []string {
	return contracttest.Violations(func(r contracttest.Reporter) { contracttest.CheckCase(r, h, c) })
}

// The broken adapters below wrap the real reference adapter and break one
// rule each; the suite must report every one of them.

type replaysCreate struct{ sandbox.SandboxProvider }

func (p replaysCreate) Create(ctx context.Context, req sandbox.CreateRequest) (sandbox.Info, error) {
	info, err := p.SandboxProvider.Create(ctx, req)
	if err != nil {
		return p.SandboxProvider.Create(context.Background(), req)
	}
	return info, err
}

type claimsSettled struct{ sandbox.SandboxProvider }

func (p claimsSettled) Create(ctx context.Context, req sandbox.CreateRequest) (sandbox.Info, error) {
	info, err := p.SandboxProvider.Create(ctx, req)
	info.CreateSettled = true
	return info, err
}

type cleansUpImplicitly struct{ sandbox.SandboxProvider }

func (p cleansUpImplicitly) Create(ctx context.Context, req sandbox.CreateRequest) (sandbox.Info, error) {
	info, err := p.SandboxProvider.Create(ctx, req)
	if err != nil {
		_ = p.SandboxProvider.Kill(context.Background(), sandbox.KillRequest{Reference: req.Reference})
	}
	return info, err
}

type leaksNativeText struct {
	sandbox.SandboxProvider
	leak string
}

func (p leaksNativeText) Kill(ctx context.Context, req sandbox.KillRequest) error {
	if err := p.SandboxProvider.Kill(ctx, req); err != nil {
		return fmt.Errorf("kill via %s: %w", p.leak, err)
	}
	return nil
}

type swallowsCommandFailure struct{ sandbox.SandboxProvider }

func (p swallowsCommandFailure) RunCommand(ctx context.Context, ref sandbox.Reference, cmd sandbox.Command) (sandbox.CommandResult, error) {
	res, err := p.SandboxProvider.RunCommand(ctx, ref, cmd)
	if errdefs.IsCommandUnconfirmed(err) {
		return sandbox.CommandResult{Stdout: []byte("partial")}, nil
	}
	return res, err
}

type unsupportedOnFailure struct{ sandbox.SandboxProvider }

func (p unsupportedOnFailure) GetInfo(ctx context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	info, err := p.SandboxProvider.GetInfo(ctx, ref)
	if err != nil {
		return info, errors.Join(err, errdefs.ErrUnsupported)
	}
	return info, nil
}

func TestSuiteReportsBrokenAdapters(t *testing.T) {
	createAtCreate := contracttest.Case{
		Operation: sandbox.OpCreate, Fault: contracttest.FaultTransport, At: refnative.CallCreate,
		WantErr: errdefs.ErrComputeUnconfirmed, WantCalls: []string{refnative.CallInspect, refnative.CallCreate},
	}
	tests := []struct {
		name  string
		wrap  func(h contracttest.Harness) sandbox.SandboxProvider
		c     contracttest.Case
		wants string
	}{
		{"replay", func(h contracttest.Harness) sandbox.SandboxProvider { return replaysCreate{h.Provider} },
			createAtCreate, "(replay)"},
		{"settlement claimed", func(h contracttest.Harness) sandbox.SandboxProvider { return claimsSettled{h.Provider} },
			createAtCreate, "claimed settlement"},
		{"implicit cleanup", func(h contracttest.Harness) sandbox.SandboxProvider { return cleansUpImplicitly{h.Provider} },
			createAtCreate, "native calls ="},
		{"native text", func(h contracttest.Harness) sandbox.SandboxProvider {
			return leaksNativeText{h.Provider, h.Native.Sensitive()[0]}
		}, contracttest.Case{
			Operation: sandbox.OpKill, Fault: contracttest.FaultCleanupFailure, At: refnative.CallRemove, Existing: true,
			WantErr: errdefs.ErrComputeUnconfirmed, WantCalls: []string{refnative.CallInspect, refnative.CallRemove},
		}, "leaks native detail"},
		{"partial output as success", func(h contracttest.Harness) sandbox.SandboxProvider { return swallowsCommandFailure{h.Provider} },
			contracttest.Case{
				Operation: sandbox.OpRunCommand, Fault: contracttest.FaultTransport, At: refnative.CallExec, Existing: true,
				WantErr: errdefs.ErrCommandUnconfirmed, WantCalls: []string{refnative.CallInspect, refnative.CallExec},
			}, "returned no error"},
		{"fault as unsupported", func(h contracttest.Harness) sandbox.SandboxProvider { return unsupportedOnFailure{h.Provider} },
			contracttest.Case{
				Operation: sandbox.OpGetInfo, Fault: contracttest.FaultTransport, At: refnative.CallInspect, Existing: true,
				WantErr: errdefs.ErrObservationUnavailable, WantCalls: []string{refnative.CallInspect},
			}, "surfaced as Unsupported"},
		{"wrong error class", func(h contracttest.Harness) sandbox.SandboxProvider { return h.Provider },
			contracttest.Case{
				Operation: sandbox.OpCreate, Fault: contracttest.FaultTransport, At: refnative.CallCreate,
				WantErr: errdefs.ErrExists, WantCalls: []string{refnative.CallInspect, refnative.CallCreate},
			}, "want class"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.Provider = tt.wrap(h)
			msgs := check(h, tt.c)
			if !containsAny(msgs, tt.wants) {
				t.Fatalf("suite did not report %q; reported %q", tt.wants, msgs)
			}
		})
	}
	t.Run("correct adapter passes", func(t *testing.T) {
		if msgs := check(newHarness(t), createAtCreate); len(msgs) != 0 {
			t.Fatalf("suite reported a correct adapter: %q", msgs)
		}
	})
}

func containsAny(msgs []string, sub string) bool {
	for _, m := range msgs {
		if strings.Contains(m, sub) {
			return true
		}
	}
	return false
}
