package nodes

import (
	"context"
	"time"

	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/nodewire"
)

// The checkpoint operations: the declaration decides first, then the node.

// constructTimeout bounds Initial and NewCompute, whose interface methods
// take no context: they construct references and do no native work.
const constructTimeout = 30 * time.Second

// Initial forwards Initial.
func (p *Proxy) Initial(ref sandbox.Reference) (sandbox.Compute, error) {
	ctx, cancel := context.WithTimeout(context.Background(), constructTimeout)
	defer cancel()
	s, err := p.session(ctx, sandbox.OpInitial)
	if err != nil {
		return sandbox.Compute{}, err
	}
	resp, err := s.Client.Initial(s.outgoing(ctx), &pb.InitialRequest{Reference: nodewire.ReferenceToWire(ref)})
	if err != nil {
		return sandbox.Compute{}, nodewire.FromError(sandbox.OpInitial, err)
	}
	c, err := nodewire.ComputeFromWire(resp.GetCompute())
	if err != nil {
		return sandbox.Compute{}, nodewire.MalformedResponse(sandbox.OpInitial, err)
	}
	return c, nil
}

// NewCompute forwards NewCompute.
func (p *Proxy) NewCompute(previous sandbox.Compute) (sandbox.Compute, error) {
	ctx, cancel := context.WithTimeout(context.Background(), constructTimeout)
	defer cancel()
	s, err := p.session(ctx, sandbox.OpNewCompute)
	if err != nil {
		return sandbox.Compute{}, err
	}
	resp, err := s.Client.NewCompute(s.outgoing(ctx), nodewire.NewComputeRequestToWire(previous))
	if err != nil {
		return sandbox.Compute{}, nodewire.FromError(sandbox.OpNewCompute, err)
	}
	c, err := nodewire.ComputeFromWire(resp.GetCompute())
	if err != nil {
		return sandbox.Compute{}, nodewire.MalformedResponse(sandbox.OpNewCompute, err)
	}
	return c, nil
}

// GetCompute forwards GetCompute.
func (p *Proxy) GetCompute(ctx context.Context, c sandbox.Compute) (sandbox.ComputeInfo, error) {
	s, err := p.session(ctx, sandbox.OpGetCompute)
	if err != nil {
		return sandbox.ComputeInfo{}, err
	}
	resp, err := s.Client.GetCompute(s.outgoing(ctx), &pb.GetComputeRequest{Compute: nodewire.ComputeToWire(c)})
	if err != nil {
		return sandbox.ComputeInfo{}, nodewire.FromError(sandbox.OpGetCompute, err)
	}
	info, err := nodewire.ComputeInfoFromWire(resp.GetInfo())
	if err != nil {
		return sandbox.ComputeInfo{}, nodewire.MalformedResponse(sandbox.OpGetCompute, err)
	}
	return info, nil
}

// Suspend forwards Suspend.
func (p *Proxy) Suspend(ctx context.Context, req sandbox.SuspendRequest) (sandbox.SuspendResult, error) {
	s, err := p.session(ctx, sandbox.OpSuspend)
	if err != nil {
		return sandbox.SuspendResult{}, err
	}
	resp, err := s.Client.Suspend(s.outgoing(ctx), nodewire.SuspendRequestToWire(req))
	if err != nil {
		return sandbox.SuspendResult{}, nodewire.FromError(sandbox.OpSuspend, err)
	}
	res, err := nodewire.SuspendResultFromWire(resp)
	if err != nil {
		return sandbox.SuspendResult{}, nodewire.MalformedResponse(sandbox.OpSuspend, err)
	}
	return res, nil
}

// Resume forwards Resume.
func (p *Proxy) Resume(ctx context.Context, req sandbox.ResumeRequest) (sandbox.ResumeResult, error) {
	s, err := p.session(ctx, sandbox.OpResume)
	if err != nil {
		return sandbox.ResumeResult{}, err
	}
	resp, err := s.Client.Resume(s.outgoing(ctx), nodewire.ResumeRequestToWire(req))
	if err != nil {
		return sandbox.ResumeResult{}, nodewire.FromError(sandbox.OpResume, err)
	}
	res, err := nodewire.ResumeResultFromWire(resp)
	if err != nil {
		return sandbox.ResumeResult{}, nodewire.MalformedResponse(sandbox.OpResume, err)
	}
	return res, nil
}

// ResumeCompute forwards ResumeCompute.
func (p *Proxy) ResumeCompute(ctx context.Context, c sandbox.Compute) (sandbox.ComputeInfo, error) {
	s, err := p.session(ctx, sandbox.OpResumeCompute)
	if err != nil {
		return sandbox.ComputeInfo{}, err
	}
	resp, err := s.Client.ResumeCompute(s.outgoing(ctx), &pb.ResumeComputeRequest{Compute: nodewire.ComputeToWire(c)})
	if err != nil {
		return sandbox.ComputeInfo{}, nodewire.FromError(sandbox.OpResumeCompute, err)
	}
	info, err := nodewire.ComputeInfoFromWire(resp.GetInfo())
	if err != nil {
		return sandbox.ComputeInfo{}, nodewire.MalformedResponse(sandbox.OpResumeCompute, err)
	}
	return info, nil
}

// KillCompute forwards KillCompute.
func (p *Proxy) KillCompute(ctx context.Context, c sandbox.Compute) error {
	s, err := p.session(ctx, sandbox.OpKillCompute)
	if err != nil {
		return err
	}
	_, err = s.Client.KillCompute(s.outgoing(ctx), &pb.KillComputeRequest{Compute: nodewire.ComputeToWire(c)})
	return nodewire.FromError(sandbox.OpKillCompute, err)
}

// DeleteSnapshot forwards DeleteSnapshot.
func (p *Proxy) DeleteSnapshot(ctx context.Context, ref sandbox.Reference, snap sandbox.SnapshotIdentity) error {
	s, err := p.session(ctx, sandbox.OpDeleteSnapshot)
	if err != nil {
		return err
	}
	_, err = s.Client.DeleteSnapshot(s.outgoing(ctx), &pb.DeleteSnapshotRequest{
		Reference: nodewire.ReferenceToWire(ref), Snapshot: nodewire.SnapshotToWire(snap),
	})
	return nodewire.FromError(sandbox.OpDeleteSnapshot, err)
}

// RunCommandCompute forwards RunCommandCompute.
func (p *Proxy) RunCommandCompute(ctx context.Context, c sandbox.Compute, cmd sandbox.Command) (sandbox.CommandResult, error) {
	s, err := p.session(ctx, sandbox.OpRunCommandCompute)
	if err != nil {
		return sandbox.CommandResult{}, err
	}
	wire, err := nodewire.CommandToWire(cmd)
	if err != nil {
		return sandbox.CommandResult{}, err
	}
	resp, err := s.Client.RunCommandCompute(s.outgoing(ctx), &pb.RunCommandComputeRequest{Compute: nodewire.ComputeToWire(c), Command: wire})
	if err != nil {
		return sandbox.CommandResult{}, nodewire.FromError(sandbox.OpRunCommandCompute, err)
	}
	res, err := nodewire.CommandResultFromWire(resp.GetResult())
	if err != nil {
		return sandbox.CommandResult{}, nodewire.MalformedResponse(sandbox.OpRunCommandCompute, err)
	}
	return res, nil
}
