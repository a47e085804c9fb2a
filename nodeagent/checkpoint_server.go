package nodeagent

import (
	"context"

	"berth.dev/platform/nodewire"
	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// The checkpoint RPCs go through the Agent like every other operation, so
// a backend that declares checkpoints unsupported answers with the typed
// unsupported code before its adapter is called.

// Initial forwards Initial.
func (s *Server) Initial(ctx context.Context, req *pb.InitialRequest) (*pb.InitialResponse, error) {
	return forward(ctx, sandbox.OpInitial,
		func() (sandbox.Reference, error) { return nodewire.ReferenceFromWire(req.GetReference()) },
		agent(ctx).Initial,
		func(c sandbox.Compute) (*pb.InitialResponse, error) {
			return &pb.InitialResponse{Compute: nodewire.ComputeToWire(c)}, nil
		})
}

// NewCompute forwards NewCompute.
func (s *Server) NewCompute(ctx context.Context, req *pb.NewComputeRequest) (*pb.NewComputeResponse, error) {
	return forward(ctx, sandbox.OpNewCompute,
		func() (sandbox.Compute, error) { return nodewire.NewComputeRequestFromWire(req) },
		agent(ctx).NewCompute,
		func(c sandbox.Compute) (*pb.NewComputeResponse, error) {
			return &pb.NewComputeResponse{Compute: nodewire.ComputeToWire(c)}, nil
		})
}

// GetCompute forwards GetCompute.
func (s *Server) GetCompute(ctx context.Context, req *pb.GetComputeRequest) (*pb.GetComputeResponse, error) {
	return forward(ctx, sandbox.OpGetCompute,
		func() (sandbox.Compute, error) { return nodewire.ComputeFromWire(req.GetCompute()) },
		agent(ctx).GetCompute,
		func(info sandbox.ComputeInfo) (*pb.GetComputeResponse, error) {
			out, err := nodewire.ComputeInfoToWire(info)
			return &pb.GetComputeResponse{Info: out}, err
		})
}

// Suspend forwards Suspend.
func (s *Server) Suspend(ctx context.Context, req *pb.SuspendRequest) (*pb.SuspendResponse, error) {
	return forward(ctx, sandbox.OpSuspend,
		func() (sandbox.SuspendRequest, error) { return nodewire.SuspendRequestFromWire(req) },
		agent(ctx).Suspend, nodewire.SuspendResultToWire)
}

// Capture forwards Capture: fenced, checked against the declaration and
// answered like Suspend.
func (s *Server) Capture(ctx context.Context, req *pb.CaptureRequest) (*pb.CaptureResponse, error) {
	return forward(ctx, sandbox.OpCapture,
		func() (sandbox.CaptureRequest, error) { return nodewire.CaptureRequestFromWire(req) },
		agent(ctx).Capture, nodewire.CaptureResultToWire)
}

// Resume forwards Resume.
func (s *Server) Resume(ctx context.Context, req *pb.ResumeRequest) (*pb.ResumeResponse, error) {
	return forward(ctx, sandbox.OpResume,
		func() (sandbox.ResumeRequest, error) { return nodewire.ResumeRequestFromWire(req) },
		agent(ctx).Resume, nodewire.ResumeResultToWire)
}

// ResumeCompute forwards ResumeCompute.
func (s *Server) ResumeCompute(ctx context.Context, req *pb.ResumeComputeRequest) (*pb.ResumeComputeResponse, error) {
	return forward(ctx, sandbox.OpResumeCompute,
		func() (sandbox.Compute, error) { return nodewire.ComputeFromWire(req.GetCompute()) },
		agent(ctx).ResumeCompute,
		func(info sandbox.ComputeInfo) (*pb.ResumeComputeResponse, error) {
			out, err := nodewire.ComputeInfoToWire(info)
			return &pb.ResumeComputeResponse{Info: out}, err
		})
}

// KillCompute forwards KillCompute.
func (s *Server) KillCompute(ctx context.Context, req *pb.KillComputeRequest) (*pb.KillComputeResponse, error) {
	c, err := nodewire.ComputeFromWire(req.GetCompute())
	if err != nil {
		return nil, fail(sandbox.OpKillCompute, err)
	}
	if err := agent(ctx).KillCompute(ctx, c); err != nil {
		return nil, fail(sandbox.OpKillCompute, err)
	}
	return &pb.KillComputeResponse{}, nil
}

// DeleteSnapshot forwards DeleteSnapshot.
func (s *Server) DeleteSnapshot(ctx context.Context, req *pb.DeleteSnapshotRequest) (*pb.DeleteSnapshotResponse, error) {
	ref, err := nodewire.ReferenceFromWire(req.GetReference())
	if err != nil {
		return nil, fail(sandbox.OpDeleteSnapshot, err)
	}
	snap, err := nodewire.SnapshotFromWire(req.GetSnapshot())
	if err != nil {
		return nil, fail(sandbox.OpDeleteSnapshot, err)
	}
	if err := agent(ctx).DeleteSnapshot(ctx, ref, snap); err != nil {
		return nil, fail(sandbox.OpDeleteSnapshot, err)
	}
	return &pb.DeleteSnapshotResponse{}, nil
}

// RunCommandCompute forwards RunCommandCompute.
func (s *Server) RunCommandCompute(ctx context.Context, req *pb.RunCommandComputeRequest) (*pb.RunCommandComputeResponse, error) {
	c, err := nodewire.ComputeFromWire(req.GetCompute())
	if err != nil {
		return nil, fail(sandbox.OpRunCommandCompute, err)
	}
	cmd, err := nodewire.CommandFromWire(req.GetCommand())
	if err != nil {
		return nil, fail(sandbox.OpRunCommandCompute, err)
	}
	res, err := agent(ctx).RunCommandCompute(ctx, c, cmd)
	if err != nil {
		return nil, fail(sandbox.OpRunCommandCompute, err)
	}
	out, err := nodewire.CommandResultToWire(res)
	if err != nil {
		return nil, fail(sandbox.OpRunCommandCompute, errdefs.ErrContract)
	}
	return &pb.RunCommandComputeResponse{Result: out}, nil
}
