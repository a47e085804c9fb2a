package docker_test

import (
	"context"
	"strings"
	"testing"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/docker/dockertest"
	"berth.dev/sandbox/errdefs"
)

// The checkpoint suite must reject adapters that break its rules: each
// wrapper below breaks one on top of the real Docker adapter, and the
// suite, run with its violations collected (contracttest.Violations), must
// report it.

func checkCheckpoint(h contracttest.Harness, c contracttest.CheckpointCase) []string {
	return contracttest.Violations(func(r contracttest.Reporter) { contracttest.CheckCheckpointCase(r, h, c) })
}

// retriesUnknownCapture deletes a capture of unknown outcome and captures
// again.
type retriesUnknownCapture struct{ *docker.Provider }

func (p retriesUnknownCapture) Suspend(ctx context.Context, req sandbox.SuspendRequest) (sandbox.SuspendResult, error) {
	res, err := p.Provider.Suspend(ctx, req)
	if errdefs.IsComputeUnconfirmed(err) {
		_ = p.Provider.DeleteSnapshot(context.Background(), req.Compute.Reference, sandbox.SnapshotIdentity{ID: p.SnapshotName(req.Compute.Reference, req.OperationID)})
		return p.Provider.Suspend(context.Background(), req)
	}
	return res, err
}

// observeThaws rolls the source back while it only observes.
type observeThaws struct{ *docker.Provider }

func (p observeThaws) Suspend(ctx context.Context, req sandbox.SuspendRequest) (sandbox.SuspendResult, error) {
	if req.ObserveOnly {
		_, _ = p.Provider.ResumeCompute(ctx, req.Compute)
	}
	return p.Provider.Suspend(ctx, req)
}

// coldStarts reports a stopped source as thawed.
type coldStarts struct{ *docker.Provider }

func (p coldStarts) ResumeCompute(ctx context.Context, c sandbox.Compute) (sandbox.ComputeInfo, error) {
	info, err := p.Provider.ResumeCompute(ctx, c)
	if errdefs.IsRuntimeNotRunning(err) {
		return sandbox.ComputeInfo{Compute: c, State: sandbox.ComputeRunning}, nil
	}
	return info, err
}

func TestCheckpointSuiteRejectsBrokenAdapters(t *testing.T) {
	cases := map[string]contracttest.CheckpointCase{}
	for _, c := range dockertest.CheckpointCases() {
		cases[string(c.Operation)+"/"+string(c.Setup)+"/"+string(c.Fault)+"@"+c.At] = c
	}
	lostRead := cases["Suspend/running/transport@"+dockertest.CallArchiveRead]
	stopped := cases["ResumeCompute/stopped/@"]
	tests := []struct {
		name  string
		wrap  func(p *docker.Provider) sandbox.SandboxProvider
		c     contracttest.CheckpointCase
		wants string
	}{
		{"an unknown capture retried", func(p *docker.Provider) sandbox.SandboxProvider { return retriesUnknownCapture{p} }, lostRead, "returned no error"},
		{"ObserveOnly that thaws", func(p *docker.Provider) sandbox.SandboxProvider { return observeThaws{p} }, lostRead, "ObserveOnly after an unknown Suspend sent mutating call"},
		{"a stopped source reported thawed", func(p *docker.Provider) sandbox.SandboxProvider { return coldStarts{p} }, stopped, "want a refusal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.c.Operation == "" {
				t.Fatal("the case is missing from dockertest.CheckpointCases")
			}
			h := newFixtureHarness(t)
			h.Provider = tt.wrap(h.Provider.(*docker.Provider))
			msgs := checkCheckpoint(h, tt.c)
			if !containsMsg(msgs, tt.wants) {
				t.Fatalf("the suite did not report %q; it reported %q", tt.wants, msgs)
			}
		})
	}
	t.Run("the adapter itself passes", func(t *testing.T) {
		for _, c := range []contracttest.CheckpointCase{lostRead, stopped} {
			if msgs := checkCheckpoint(newFixtureHarness(t), c); len(msgs) != 0 {
				t.Fatalf("the suite reported the real adapter: %q", msgs)
			}
		}
	})
}

func containsMsg(msgs []string, sub string) bool {
	for _, m := range msgs {
		if strings.Contains(m, sub) {
			return true
		}
	}
	return false
}
