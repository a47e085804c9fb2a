package nodes

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
// proxy answers Capture with when the node agent has no Capture RPC: an
// agent of berth.sandboxnode.v1/5 built before the RPC was added (see the
// change log in proto/berth/sandboxnode/v1/version.go) answers gRPC's own
// UNIMPLEMENTED.
const ReasonNodeProtocolNoCapture providercontract.ReasonCode = "node_protocol_no_capture"

// Capture forwards Capture like Suspend. The declaration decides first
// (a node without checkpoints is refused with its own reason before
// anything is sent). A node agent without the Capture RPC answers gRPC's
// own UNIMPLEMENTED "unknown method" status, without a protocol error
// code: an unknown method runs nothing, so exactly that answer is a typed
// UnsupportedError (ReasonNodeProtocolNoCapture) and not Capture's unknown
// outcome. Every other failure, any other UNIMPLEMENTED included, is
// converted as for Suspend.
func (p *Proxy) Capture(ctx context.Context, req sandbox.CaptureRequest) (sandbox.CaptureResult, error) {
	var noRPC bool
	send := func(c pb.NodeServiceClient, ctx context.Context, r *pb.CaptureRequest, opts ...grpc.CallOption) (*pb.CaptureResponse, error) {
		resp, err := c.Capture(ctx, r, opts...)
		noRPC = unknownMethod(err, "Capture")
		return resp, err
	}
	out, err := call(ctx, p, sandbox.OpCapture, req.Compute.Reference,
		request(nodewire.CaptureRequestToWire(req)), send, nodewire.CaptureResultFromWire)
	if err != nil && noRPC {
		return sandbox.CaptureResult{}, &providercontract.UnsupportedError{Operation: sandbox.OpCapture, Code: ReasonNodeProtocolNoCapture}
	}
	return out, err
}

// unknownMethod reports whether err is gRPC's own answer that the server
// has no such method: status UNIMPLEMENTED without details, whose message
// grpc-go writes as "unknown method <method> for service <service>" (a
// server built without the method) or "method <method> not implemented"
// (the generated Unimplemented server's). Neither runs anything. The
// protocol's unsupported answer carries an ErrorInfo, so it never matches,
// and neither does any other UNIMPLEMENTED (a client's missing
// decompressor, for one, comes after the server ran the call).
func unknownMethod(err error, method string) bool {
	st, ok := status.FromError(err)
	if err == nil || !ok || st.Code() != codes.Unimplemented || len(st.Details()) != 0 {
		return false
	}
	msg := st.Message()
	return strings.HasPrefix(msg, "unknown method "+method+" ") || msg == "method "+method+" not implemented"
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
