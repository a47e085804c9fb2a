package nodeagent

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// Agent runs provider operations for Core: it answers unsupported
// operations from the declaration before the adapter, serializes the
// operations of each allocation, bounds each by the caller's deadline and
// counts what is in flight. It never retries or replays anything.
type Agent struct {
	provider sandbox.SandboxProvider
	decl     providercontract.Operations

	mu     sync.Mutex
	locks  map[string]*allocationLock
	active atomic.Int64
}

type allocationLock struct {
	sem   chan struct{}
	users int
}

// NewAgent wraps provider, whose declaration must validate.
func NewAgent(provider sandbox.SandboxProvider) (*Agent, error) {
	decl := provider.ProviderOperations()
	if err := sandbox.ValidateOperations(decl); err != nil {
		return nil, err
	}
	return &Agent{provider: provider, decl: decl, locks: map[string]*allocationLock{}}, nil
}

// Operations returns the adapter's declaration.
func (a *Agent) Operations() providercontract.Operations { return a.decl.Clone() }

// Active returns the number of operations in flight.
func (a *Agent) Active() int { return int(a.active.Load()) }

// run admits op for allocation and calls f with a bounded context while
// holding the allocation's turn.
func (a *Agent) run(ctx context.Context, op providercontract.Operation, allocation string, f func(context.Context) error) error {
	if err := a.decl.Check(op); err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, MaxOperationTime)
		defer cancel()
	}
	release, err := a.acquire(ctx, allocation)
	if err != nil {
		return err
	}
	defer release()
	a.active.Add(1)
	defer a.active.Add(-1)
	return f(ctx)
}

// runTracked runs Create for allocation. It
// waits for the allocation's turn like run; once the mutation has started
// the caller's cancellation reaches it only CreateGrace later (its
// deadline still binds it): if the caller goes away (Core killed, the
// connection cut) the caller gets its context's error, an unknown outcome,
// while the mutation goes on to its end holding the allocation's turn. So
// it is not left half done because a peer vanished, it stays tracked
// (Active counts it), and the next call on the allocation (Core's GetInfo)
// waits for it and observes its result: a completed Create settles instead
// of staying unknown forever. Nothing is replayed: the mutation runs once.
func runTracked[T any](a *Agent, ctx context.Context, op providercontract.Operation, allocation string, f func(context.Context) (T, error)) (T, error) {
	var zero T
	if err := a.decl.Check(op); err != nil {
		return zero, err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(MaxOperationTime)
	}
	release, err := a.acquire(ctx, allocation)
	if err != nil {
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	a.active.Add(1)
	go func() {
		defer release()
		defer a.active.Add(-1)
		mctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
		defer cancel()
		// The caller's cancellation reaches the mutation only after
		// CreateGrace: enough for a Create whose engine answers to finish,
		// short enough that a hung engine call does not hold the
		// allocation's observations for the whole deadline.
		stop := context.AfterFunc(ctx, func() { time.AfterFunc(CreateGrace, cancel) })
		defer stop()
		v, err := f(mctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// acquire waits for allocation's turn, bounded by ctx. When the caller's
// deadline ends the wait nothing has reached the adapter, but the caller
// gets the same answer as for any expired call: its context's error, an
// unknown outcome on the wire, so no caller ever takes a wait for proof
// that a mutation did not happen.
func (a *Agent) acquire(ctx context.Context, allocation string) (func(), error) {
	a.mu.Lock()
	l := a.locks[allocation]
	if l == nil {
		l = &allocationLock{sem: make(chan struct{}, 1)}
		a.locks[allocation] = l
	}
	l.users++
	a.mu.Unlock()
	done := func() {
		a.mu.Lock()
		l.users--
		if l.users == 0 {
			delete(a.locks, allocation)
		}
		a.mu.Unlock()
	}
	select {
	case l.sem <- struct{}{}:
		return func() { <-l.sem; done() }, nil
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
}

// Create forwards Create. A failed call may still return settlement Info.
// Once started, the Create runs to its end (or the caller's deadline) even
// when the caller goes away: see runTracked.
func (a *Agent) Create(ctx context.Context, req sandbox.CreateRequest) (sandbox.Info, error) {
	return runTracked(a, ctx, sandbox.OpCreate, req.Reference.AllocationID, func(ctx context.Context) (sandbox.Info, error) {
		return a.provider.Create(ctx, req)
	})
}

// CreateSeeded forwards CreateSeeded (a fork's child) like Create: in the
// child's allocation's turn, run to its end once started (runTracked), a
// failure keeping its settlement Info.
func (a *Agent) CreateSeeded(ctx context.Context, req sandbox.SeededCreateRequest) (sandbox.Info, error) {
	return runTracked(a, ctx, sandbox.OpCreateSeeded, req.Create.Reference.AllocationID, func(ctx context.Context) (sandbox.Info, error) {
		cp, ok := a.provider.(sandbox.CheckpointProvider)
		if !ok {
			return sandbox.Info{}, errdefs.ErrContract
		}
		return cp.CreateSeeded(ctx, req)
	})
}

// ExportSnapshot forwards ExportSnapshot, in the owner allocation's turn.
func (a *Agent) ExportSnapshot(ctx context.Context, owner sandbox.Reference, s sandbox.SnapshotIdentity, w io.Writer) error {
	return a.runCheckpoint(ctx, sandbox.OpExportSnapshot, owner.AllocationID, func(ctx context.Context, cp sandbox.CheckpointProvider) error {
		return cp.ExportSnapshot(ctx, owner, s, w)
	})
}

// ImportSnapshot forwards ImportSnapshot, in the owner allocation's turn.
func (a *Agent) ImportSnapshot(ctx context.Context, req sandbox.ImportRequest, r io.Reader) (sandbox.SnapshotIdentity, error) {
	return forwardCheckpoint(ctx, a, sandbox.OpImportSnapshot, req.Owner.AllocationID, func(ctx context.Context, cp sandbox.CheckpointProvider) (sandbox.SnapshotIdentity, error) {
		return cp.ImportSnapshot(ctx, req, r)
	})
}

// GetInfo forwards GetInfo.
func (a *Agent) GetInfo(ctx context.Context, ref sandbox.Reference) (info sandbox.Info, err error) {
	err = a.run(ctx, sandbox.OpGetInfo, ref.AllocationID, func(ctx context.Context) error {
		info, err = a.provider.GetInfo(ctx, ref)
		return err
	})
	return info, err
}

// GetInfoBatch is GetInfo for each of refs (ObserveBatch): each target in
// its own allocation's turn, at most BatchReads adapter reads at once,
// each result at its target's index. Targets share the call's deadline
// less BatchMargin's part of it, so a target that cannot get its turn in
// time answers its own context error, never the whole call's.
func (a *Agent) GetInfoBatch(ctx context.Context, refs []sandbox.Reference) ([]sandbox.Info, []error) {
	infos := make([]sandbox.Info, len(refs))
	errs := make([]error, len(refs))
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-time.Until(deadline)/BatchMargin))
		defer cancel()
	}
	slots := make(chan struct{}, BatchReads)
	var wg sync.WaitGroup
	for i, ref := range refs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = a.run(ctx, sandbox.OpGetInfo, ref.AllocationID, func(ctx context.Context) error {
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					return ctx.Err()
				}
				defer func() { <-slots }()
				var err error
				infos[i], err = a.provider.GetInfo(ctx, ref)
				return err
			})
		}()
	}
	wg.Wait()
	return infos, errs
}

// Renew forwards Renew.
func (a *Agent) Renew(ctx context.Context, ref sandbox.Reference) (info sandbox.Info, err error) {
	err = a.run(ctx, sandbox.OpRenew, ref.AllocationID, func(ctx context.Context) error {
		info, err = a.provider.Renew(ctx, ref)
		return err
	})
	return info, err
}

// Kill forwards Kill. Unlike Create it stays tied to its caller: an
// interrupted Kill leaves cleanup unknown, and Core repeats Kill (which is
// idempotent) until absence is confirmed.
func (a *Agent) Kill(ctx context.Context, req sandbox.KillRequest) error {
	return a.run(ctx, sandbox.OpKill, req.Reference.AllocationID, func(ctx context.Context) error {
		return a.provider.Kill(ctx, req)
	})
}

// RunCommand forwards RunCommand.
func (a *Agent) RunCommand(ctx context.Context, ref sandbox.Reference, cmd sandbox.Command) (res sandbox.CommandResult, err error) {
	err = a.run(ctx, sandbox.OpRunCommand, ref.AllocationID, func(ctx context.Context) error {
		res, err = a.provider.RunCommand(ctx, ref, cmd)
		return err
	})
	return res, err
}

// Observe forwards Observe when the adapter is an observation source.
func (a *Agent) Observe(ctx context.Context, ref sandbox.Reference) (obs sandbox.Observation, err error) {
	src, ok := a.provider.(sandbox.ObservationSource)
	err = a.run(ctx, sandbox.OpObserve, ref.AllocationID, func(ctx context.Context) error {
		if !ok {
			return errdefs.ErrContract
		}
		obs, err = src.Observe(ctx, ref)
		return err
	})
	return obs, err
}

// runCheckpoint runs f under run's rules with the adapter as a
// CheckpointProvider; every adapter implements it (support is decided by
// the declaration, checked first), so one that does not breaks the
// contract.
func (a *Agent) runCheckpoint(ctx context.Context, op providercontract.Operation, allocation string, f func(context.Context, sandbox.CheckpointProvider) error) error {
	return a.run(ctx, op, allocation, func(ctx context.Context) error {
		cp, ok := a.provider.(sandbox.CheckpointProvider)
		if !ok {
			return errdefs.ErrContract
		}
		return f(ctx, cp)
	})
}

// forwardCheckpoint is runCheckpoint for a checkpoint operation with a
// result: the forwarding methods below are each one call.
func forwardCheckpoint[T any](ctx context.Context, a *Agent, op providercontract.Operation, allocation string, f func(context.Context, sandbox.CheckpointProvider) (T, error)) (T, error) {
	var out T
	err := a.runCheckpoint(ctx, op, allocation, func(ctx context.Context, cp sandbox.CheckpointProvider) error {
		var err error
		out, err = f(ctx, cp)
		return err
	})
	return out, err
}

// Initial forwards Initial.
func (a *Agent) Initial(ctx context.Context, ref sandbox.Reference) (sandbox.Compute, error) {
	return forwardCheckpoint(ctx, a, sandbox.OpInitial, ref.AllocationID, func(_ context.Context, cp sandbox.CheckpointProvider) (sandbox.Compute, error) {
		return cp.Initial(ref)
	})
}

// NewCompute forwards NewCompute.
func (a *Agent) NewCompute(ctx context.Context, prev sandbox.Compute) (sandbox.Compute, error) {
	return forwardCheckpoint(ctx, a, sandbox.OpNewCompute, prev.Reference.AllocationID, func(_ context.Context, cp sandbox.CheckpointProvider) (sandbox.Compute, error) {
		return cp.NewCompute(prev)
	})
}

// GetCompute forwards GetCompute.
func (a *Agent) GetCompute(ctx context.Context, c sandbox.Compute) (sandbox.ComputeInfo, error) {
	return forwardCheckpoint(ctx, a, sandbox.OpGetCompute, c.Reference.AllocationID, func(ctx context.Context, cp sandbox.CheckpointProvider) (sandbox.ComputeInfo, error) {
		return cp.GetCompute(ctx, c)
	})
}

// Suspend forwards Suspend.
func (a *Agent) Suspend(ctx context.Context, req sandbox.SuspendRequest) (sandbox.SuspendResult, error) {
	return forwardCheckpoint(ctx, a, sandbox.OpSuspend, req.Compute.Reference.AllocationID, func(ctx context.Context, cp sandbox.CheckpointProvider) (sandbox.SuspendResult, error) {
		return cp.Suspend(ctx, req)
	})
}

// Capture forwards Capture.
func (a *Agent) Capture(ctx context.Context, req sandbox.CaptureRequest) (sandbox.CaptureResult, error) {
	return forwardCheckpoint(ctx, a, sandbox.OpCapture, req.Compute.Reference.AllocationID, func(ctx context.Context, cp sandbox.CheckpointProvider) (sandbox.CaptureResult, error) {
		return cp.Capture(ctx, req)
	})
}

// Resume forwards Resume.
func (a *Agent) Resume(ctx context.Context, req sandbox.ResumeRequest) (sandbox.ResumeResult, error) {
	return forwardCheckpoint(ctx, a, sandbox.OpResume, req.Target.Reference.AllocationID, func(ctx context.Context, cp sandbox.CheckpointProvider) (sandbox.ResumeResult, error) {
		return cp.Resume(ctx, req)
	})
}

// ResumeCompute forwards ResumeCompute.
func (a *Agent) ResumeCompute(ctx context.Context, c sandbox.Compute) (sandbox.ComputeInfo, error) {
	return forwardCheckpoint(ctx, a, sandbox.OpResumeCompute, c.Reference.AllocationID, func(ctx context.Context, cp sandbox.CheckpointProvider) (sandbox.ComputeInfo, error) {
		return cp.ResumeCompute(ctx, c)
	})
}

// KillCompute forwards KillCompute.
func (a *Agent) KillCompute(ctx context.Context, c sandbox.Compute) error {
	return a.runCheckpoint(ctx, sandbox.OpKillCompute, c.Reference.AllocationID, func(ctx context.Context, cp sandbox.CheckpointProvider) error {
		return cp.KillCompute(ctx, c)
	})
}

// DeleteSnapshot forwards DeleteSnapshot.
func (a *Agent) DeleteSnapshot(ctx context.Context, ref sandbox.Reference, s sandbox.SnapshotIdentity) error {
	return a.runCheckpoint(ctx, sandbox.OpDeleteSnapshot, ref.AllocationID, func(ctx context.Context, cp sandbox.CheckpointProvider) error {
		return cp.DeleteSnapshot(ctx, ref, s)
	})
}

// RunCommandCompute forwards RunCommandCompute.
func (a *Agent) RunCommandCompute(ctx context.Context, c sandbox.Compute, cmd sandbox.Command) (sandbox.CommandResult, error) {
	return forwardCheckpoint(ctx, a, sandbox.OpRunCommandCompute, c.Reference.AllocationID, func(ctx context.Context, cp sandbox.CheckpointProvider) (sandbox.CommandResult, error) {
		return cp.RunCommandCompute(ctx, c, cmd)
	})
}
