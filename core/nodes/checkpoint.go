package nodes

import (
	"context"
	"time"

	"berth.dev/platform/nodewire"
	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/providercontract"
)

// The checkpoint operations: the declaration decides first, then the node.

// constructTimeout bounds Initial and NewCompute, whose interface methods
// take no context: they construct references and do no native work.
const constructTimeout = 30 * time.Second

// Initial forwards Initial.
func (p *Proxy) Initial(ref sandbox.Reference) (sandbox.Compute, error) {
	ctx, cancel := context.WithTimeout(context.Background(), constructTimeout)
	defer cancel()
	return call(ctx, p, sandbox.OpInitial, ref,
		request(&pb.InitialRequest{Reference: nodewire.ReferenceToWire(ref)}),
		pb.NodeServiceClient.Initial,
		func(r *pb.InitialResponse) (sandbox.Compute, error) { return nodewire.ComputeFromWire(r.GetCompute()) })
}

// NewCompute forwards NewCompute.
func (p *Proxy) NewCompute(previous sandbox.Compute) (sandbox.Compute, error) {
	ctx, cancel := context.WithTimeout(context.Background(), constructTimeout)
	defer cancel()
	return call(ctx, p, sandbox.OpNewCompute, previous.Reference,
		request(nodewire.NewComputeRequestToWire(previous)),
		pb.NodeServiceClient.NewCompute,
		func(r *pb.NewComputeResponse) (sandbox.Compute, error) {
			return nodewire.ComputeFromWire(r.GetCompute())
		})
}

// GetCompute forwards GetCompute.
func (p *Proxy) GetCompute(ctx context.Context, c sandbox.Compute) (sandbox.ComputeInfo, error) {
	return call(ctx, p, sandbox.OpGetCompute, c.Reference,
		request(&pb.GetComputeRequest{Compute: nodewire.ComputeToWire(c)}),
		pb.NodeServiceClient.GetCompute, computeInfo[*pb.GetComputeResponse])
}

// Suspend forwards Suspend.
func (p *Proxy) Suspend(ctx context.Context, req sandbox.SuspendRequest) (sandbox.SuspendResult, error) {
	return call(ctx, p, sandbox.OpSuspend, req.Compute.Reference,
		request(nodewire.SuspendRequestToWire(req)), pb.NodeServiceClient.Suspend, nodewire.SuspendResultFromWire)
}

// ReasonNodeProtocolNoCapture is the reason of the UnsupportedError the
// proxy answers Capture with: berth.sandboxnode.v1 has no Capture RPC yet
// (step K1b of docs/files-fork-plan.md adds it).
const ReasonNodeProtocolNoCapture providercontract.ReasonCode = "node_protocol_no_capture"

// Capture is not carried by the node protocol yet, so it answers a typed
// UnsupportedError (ReasonNodeProtocolNoCapture) after the declaration's
// own check, and sends nothing to the node. The node's declaration still
// decides Capture like every other checkpoint operation (the uniform rule
// forbids deciding it alone), so a node that supports checkpoints declares
// Capture supported while this proxy cannot forward it: no Core caller
// uses Capture before K1b adds the RPC.
func (p *Proxy) Capture(context.Context, sandbox.CaptureRequest) (sandbox.CaptureResult, error) {
	if err := p.ops.Check(sandbox.OpCapture); err != nil {
		return sandbox.CaptureResult{}, err
	}
	return sandbox.CaptureResult{}, &providercontract.UnsupportedError{Operation: sandbox.OpCapture, Code: ReasonNodeProtocolNoCapture}
}

// Resume forwards Resume.
func (p *Proxy) Resume(ctx context.Context, req sandbox.ResumeRequest) (sandbox.ResumeResult, error) {
	return call(ctx, p, sandbox.OpResume, req.Target.Reference,
		func() (*pb.ResumeRequest, error) { return nodewire.ResumeRequestToWire(req) },
		pb.NodeServiceClient.Resume, nodewire.ResumeResultFromWire)
}

// ResumeCompute forwards ResumeCompute.
func (p *Proxy) ResumeCompute(ctx context.Context, c sandbox.Compute) (sandbox.ComputeInfo, error) {
	return call(ctx, p, sandbox.OpResumeCompute, c.Reference,
		request(&pb.ResumeComputeRequest{Compute: nodewire.ComputeToWire(c)}),
		pb.NodeServiceClient.ResumeCompute, computeInfo[*pb.ResumeComputeResponse])
}

// computeInfo reads the compute info of a GetCompute or ResumeCompute
// response.
func computeInfo[R interface{ GetInfo() *pb.ComputeInfo }](r R) (sandbox.ComputeInfo, error) {
	return nodewire.ComputeInfoFromWire(r.GetInfo())
}

// KillCompute forwards KillCompute.
func (p *Proxy) KillCompute(ctx context.Context, c sandbox.Compute) error {
	_, err := call(ctx, p, sandbox.OpKillCompute, c.Reference,
		request(&pb.KillComputeRequest{Compute: nodewire.ComputeToWire(c)}),
		pb.NodeServiceClient.KillCompute, done[*pb.KillComputeResponse])
	return err
}

// DeleteSnapshot forwards DeleteSnapshot.
func (p *Proxy) DeleteSnapshot(ctx context.Context, ref sandbox.Reference, snap sandbox.SnapshotIdentity) error {
	_, err := call(ctx, p, sandbox.OpDeleteSnapshot, ref,
		request(&pb.DeleteSnapshotRequest{Reference: nodewire.ReferenceToWire(ref), Snapshot: nodewire.SnapshotToWire(snap)}),
		pb.NodeServiceClient.DeleteSnapshot, done[*pb.DeleteSnapshotResponse])
	return err
}

// RunCommandCompute forwards RunCommandCompute.
func (p *Proxy) RunCommandCompute(ctx context.Context, c sandbox.Compute, cmd sandbox.Command) (sandbox.CommandResult, error) {
	return call(ctx, p, sandbox.OpRunCommandCompute, c.Reference,
		func() (*pb.RunCommandComputeRequest, error) {
			wire, err := nodewire.CommandToWire(cmd)
			return &pb.RunCommandComputeRequest{Compute: nodewire.ComputeToWire(c), Command: wire}, err
		},
		pb.NodeServiceClient.RunCommandCompute,
		func(r *pb.RunCommandComputeResponse) (sandbox.CommandResult, error) {
			return nodewire.CommandResultFromWire(r.GetResult())
		})
}

// request is a request that needs no check.
func request[Req any](r Req) func() (Req, error) { return func() (Req, error) { return r, nil } }
