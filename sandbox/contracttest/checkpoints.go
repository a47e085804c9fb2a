package contracttest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// CheckpointNative is the native-side fixture of an adapter that declares
// checkpoint support.
type CheckpointNative interface {
	Native
	// PauseCompute and StopCompute put ref's first incarnation into that
	// state natively, as an aborted suspend or something outside the
	// adapter would.
	PauseCompute(ref sandbox.Reference)
	StopCompute(ref sandbox.Reference)
	// PlantForeignSnapshot creates resources named as the snapshot a
	// Suspend of ref under operationID would make, labelled for another
	// owner, and returns the identity that names them. ForeignIntact
	// covers them too.
	PlantForeignSnapshot(ref sandbox.Reference, operationID string) sandbox.SnapshotIdentity
}

// CheckpointSetup is the state a checkpoint case starts from, reached
// through the adapter (and CheckpointNative) without faults.
type CheckpointSetup string

// The setups.
const (
	// SetupRunning: ref created, its first incarnation running.
	SetupRunning CheckpointSetup = "running"
	// SetupPaused: running, then paused natively (an aborted suspend).
	SetupPaused CheckpointSetup = "paused"
	// SetupStopped: running, then stopped natively.
	SetupStopped CheckpointSetup = "stopped"
	// SetupSuspended: running, then suspended: a snapshot exists and the
	// first incarnation does not.
	SetupSuspended CheckpointSetup = "suspended"
)

// CheckpointCase is one checkpoint scenario: from Setup, Operation under
// Fault at native call At. The operations: Suspend (of the first
// incarnation, under a fresh operation id), Resume (of the setup's
// snapshot into the next incarnation), ResumeCompute (of the first
// incarnation), KillCompute (of the first incarnation) and DeleteSnapshot
// (of the setup's snapshot, or of the foreign one planted).
type CheckpointCase struct {
	Operation providercontract.Operation
	Setup     CheckpointSetup
	// Fault is "" for none.
	Fault   Fault
	At      string
	WantErr error
	// WantCalls is the exact list of native calls the operation makes.
	WantCalls []string
	// NeverAgain, for a Suspend whose faulted attempt began capturing,
	// lists the native calls that perform a capture: the Suspend repeated
	// under the same operation id must send none of them. (After any
	// Suspend or Resume of unknown outcome, the same operation with
	// ObserveOnly must send no mutating call at all.)
	NeverAgain []string
}

func (c CheckpointCase) name() string {
	n := string(c.Operation) + "/" + string(c.Setup)
	if c.Fault != "" {
		n += "/" + string(c.Fault)
	}
	if c.At != "" {
		n += "@" + c.At
	}
	return n
}

// requiredCheckpointCoverage is what every checkpoint adapter's cases must
// include: lost answers during capture and restore, foreign snapshot
// names, an aborted pause resumed, a stopped source refused, cleanup of
// the exact incarnation and snapshot.
var requiredCheckpointCoverage = []struct {
	op    providercontract.Operation
	setup CheckpointSetup
	fault Fault
}{
	{sandbox.OpSuspend, SetupRunning, FaultTransport},
	{sandbox.OpSuspend, SetupRunning, FaultCancelAfterDispatch},
	{sandbox.OpSuspend, SetupRunning, FaultForeignOwnership},
	{sandbox.OpResume, SetupSuspended, FaultTransport},
	{sandbox.OpResume, SetupSuspended, FaultCancelAfterDispatch},
	{sandbox.OpResumeCompute, SetupPaused, ""},
	{sandbox.OpResumeCompute, SetupStopped, ""},
	{sandbox.OpKillCompute, SetupRunning, FaultCleanupFailure},
	{sandbox.OpDeleteSnapshot, SetupSuspended, FaultCleanupFailure},
	{sandbox.OpDeleteSnapshot, SetupRunning, FaultForeignOwnership},
}

// RunCheckpointFailures runs every case against a fresh harness from
// factory (whose Native must be a CheckpointNative) and checks the
// required coverage.
func RunCheckpointFailures(t *testing.T, factory func(t *testing.T) Harness, cases []CheckpointCase) {
	t.Helper()
	for _, req := range requiredCheckpointCoverage {
		if !slices.ContainsFunc(cases, func(c CheckpointCase) bool {
			return c.Operation == req.op && c.Setup == req.setup && c.Fault == req.fault
		}) {
			t.Errorf("checkpoint cases do not cover %s from %s under %q", req.op, req.setup, req.fault)
		}
	}
	for _, c := range cases {
		t.Run(c.name(), func(t *testing.T) { CheckCheckpointCase(t, factory(t), c) })
	}
}

// CheckCheckpointCase runs one case against h and reports every
// violation; it is exported so that adapters' tests can prove it rejects
// a broken adapter.
func CheckCheckpointCase(t Reporter, h Harness, c CheckpointCase) {
	t.Helper()
	cp, ok := h.Provider.(sandbox.CheckpointProvider)
	if !ok {
		t.Fatalf("the adapter is no CheckpointProvider")
	}
	native, ok := h.Native.(CheckpointNative)
	if !ok {
		t.Fatalf("the fixture is no CheckpointNative")
	}
	bg := context.Background()
	setupCtx, setupCancel := context.WithTimeout(bg, 30*time.Second)
	defer setupCancel()
	sc := setupCheckpointCase(setupCtx, t, h, cp, native, c)
	h.Native.ResetCalls()

	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	if c.Fault != "" && c.Fault != FaultForeignOwnership {
		h.Native.Arm(c.At, c.Fault, cancel)
	}
	err := sc.run(ctx, t, c.Operation, false)
	checkCheckpointOutcome(t, h, c, err)

	// Recovery after an unknown capture or restore observes the exact
	// attempt and never performs it again.
	unknown := (c.Operation == sandbox.OpSuspend || c.Operation == sandbox.OpResume) &&
		(c.Fault == FaultTransport || c.Fault == FaultCancelAfterDispatch)
	if !unknown {
		return
	}
	checkCheckpointRecovery(t, h, c, sc)
}

// checkpointScenario is what a checkpoint case operates on once its Setup
// is reached: ref's first incarnation, the snapshot (the setup's, or the
// planted foreign one), the operation id and the Resume request into the
// next incarnation.
type checkpointScenario struct {
	cp       sandbox.CheckpointProvider
	ref      sandbox.Reference
	first    sandbox.Compute
	snapshot sandbox.SnapshotIdentity
	op       string
	resume   sandbox.ResumeRequest
}

// setupCheckpointCase creates a fresh Reference and brings it to c.Setup
// through the adapter and the native fixture, without faults, so a
// failure here is a broken harness (Fatalf), not a finding of the case.
func setupCheckpointCase(ctx context.Context, t Reporter, h Harness, cp sandbox.CheckpointProvider, native CheckpointNative, c CheckpointCase) checkpointScenario {
	t.Helper()
	ref := NewReference()
	if info, err := h.Provider.Create(ctx, CreateRequest(ref, h.Resources)); err != nil || !info.IsSettledRunning(ref) {
		t.Fatalf("setup Create: %+v, %v", info, err)
	}
	first, err := cp.Initial(ref)
	if err != nil {
		t.Fatalf("Initial: %v", err)
	}
	var snapshot sandbox.SnapshotIdentity
	switch c.Setup {
	case SetupRunning:
	case SetupPaused:
		native.PauseCompute(ref)
	case SetupStopped:
		native.StopCompute(ref)
	case SetupSuspended:
		res, err := cp.Suspend(ctx, sandbox.SuspendRequest{Compute: first, OperationID: uuid.NewString()})
		if err != nil {
			t.Fatalf("setup Suspend: %v", err)
		}
		snapshot = res.Snapshot
	default:
		t.Fatalf("unknown setup %q", c.Setup)
	}
	op := uuid.NewString()
	if c.Fault == FaultForeignOwnership {
		snapshot = native.PlantForeignSnapshot(ref, op)
	}
	next, err := cp.NewCompute(first)
	if err != nil {
		t.Fatalf("NewCompute: %v", err)
	}
	resume := sandbox.ResumeRequest{
		Snapshot: snapshot, Target: next, OperationID: op,
		Resources: CreateRequest(ref, h.Resources).Resources, Bootstrap: CreateRequest(ref, h.Resources).Bootstrap,
	}
	return checkpointScenario{cp: cp, ref: ref, first: first, snapshot: snapshot, op: op, resume: resume}
}

// run performs operation on the scenario (Suspend and Resume under its one
// operation id, so a repeat is the same attempt), with ObserveOnly where
// the operation has it.
func (sc checkpointScenario) run(ctx context.Context, t Reporter, operation providercontract.Operation, observeOnly bool) error {
	switch operation {
	case sandbox.OpSuspend:
		_, err := sc.cp.Suspend(ctx, sandbox.SuspendRequest{Compute: sc.first, OperationID: sc.op, ObserveOnly: observeOnly})
		return err
	case sandbox.OpResume:
		r := sc.resume
		r.ObserveOnly = observeOnly
		_, err := sc.cp.Resume(ctx, r)
		return err
	case sandbox.OpResumeCompute:
		_, err := sc.cp.ResumeCompute(ctx, sc.first)
		return err
	case sandbox.OpKillCompute:
		return sc.cp.KillCompute(ctx, sc.first)
	case sandbox.OpDeleteSnapshot:
		return sc.cp.DeleteSnapshot(ctx, sc.ref, sc.snapshot)
	}
	t.Fatalf("no checkpoint scenario for operation %s", operation)
	return nil
}

// checkCheckpointOutcome checks the faulted operation's error class and
// text and the native calls it sent; a ResumeCompute of a stopped source
// must be refused without starting anything.
func checkCheckpointOutcome(t Reporter, h Harness, c CheckpointCase, err error) {
	t.Helper()
	if c.WantErr != nil && err == nil {
		t.Errorf("%s returned no error, want class %v", c.name(), c.WantErr)
	}
	if !errors.Is(err, c.WantErr) {
		t.Errorf("error = %v, want class %v", err, c.WantErr)
	}
	if errdefs.IsUnsupported(err) {
		t.Errorf("a checkpoint fault surfaced as Unsupported: %v", err)
	}
	for _, s := range h.Native.Sensitive() {
		if err != nil && s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("error leaks native detail %q: %v", s, err)
		}
	}
	stoppedSource := c.Operation == sandbox.OpResumeCompute && c.Setup == SetupStopped
	checkNativeCalls(t, h, c.WantCalls, c.Fault == FaultForeignOwnership, func(name string) {
		if stoppedSource {
			t.Errorf("ResumeCompute of a stopped source sent %s: it never starts compute", name)
		}
	})
	if stoppedSource && !errdefs.IsRuntimeNotRunning(err) {
		t.Errorf("ResumeCompute of a stopped source = %v, want a refusal (runtime not running)", err)
	}
}

// checkCheckpointRecovery follows a Suspend or Resume of unknown outcome
// as Core would: the same operation with ObserveOnly must send no mutating
// call, and a Suspend repeated under the same operation id must not
// capture again (c.NeverAgain).
func checkCheckpointRecovery(t Reporter, h Harness, c CheckpointCase, sc checkpointScenario) {
	t.Helper()
	h.Native.ResetCalls()
	octx, ocancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ocancel()
	_ = sc.run(octx, t, c.Operation, true)
	for _, call := range h.Native.Calls() {
		if call.Mutating {
			t.Errorf("ObserveOnly after an unknown %s sent mutating call %s", c.Operation, call.Name)
		}
	}
	if c.Operation != sandbox.OpSuspend || len(c.NeverAgain) == 0 {
		return
	}
	h.Native.ResetCalls()
	_ = sc.run(octx, t, c.Operation, false)
	for _, call := range h.Native.Calls() {
		if slices.Contains(c.NeverAgain, call.Name) && call.Mutating {
			t.Errorf("Suspend repeated under the same operation id captured again (%s)", call.Name)
		}
	}
}
