package nodeagent

import (
	"context"

	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/nodewire"
)

// The checkpoint RPCs go through the Agent like every other operation, so
// a backend that declares checkpoints unsupported answers with the typed
// unsupported code before its adapter is called.

// Initial forwards Initial.
func (s *Server) Initial(ctx context.Context, req *pb.InitialRequest) (*pb.InitialResponse, error) {
	ref, err := nodewire.ReferenceFromWire(req.GetReference())
	if err != nil {
		return nil, fail(sandbox.OpInitial, err)
	}
	c, err := s.agent.Initial(ctx, ref)
	if err != nil {
		return nil, fail(sandbox.OpInitial, err)
	}
	return &pb.InitialResponse{Compute: nodewire.ComputeToWire(c)}, nil
}

// NewCompute forwards NewCompute.
func (s *Server) NewCompute(ctx context.Context, req *pb.NewComputeRequest) (*pb.NewComputeResponse, error) {
	prev, err := nodewire.NewComputeRequestFromWire(req)
	if err != nil {
		return nil, fail(sandbox.OpNewCompute, err)
	}
	c, err := s.agent.NewCompute(ctx, prev)
	if err != nil {
		return nil, fail(sandbox.OpNewCompute, err)
	}
	return &pb.NewComputeResponse{Compute: nodewire.ComputeToWire(c)}, nil
}

// GetCompute forwards GetCompute.
func (s *Server) GetCompute(ctx context.Context, req *pb.GetComputeRequest) (*pb.GetComputeResponse, error) {
	c, err := nodewire.ComputeFromWire(req.GetCompute())
	if err != nil {
		return nil, fail(sandbox.OpGetCompute, err)
	}
	info, err := s.agent.GetCompute(ctx, c)
	if err != nil {
		return nil, fail(sandbox.OpGetCompute, err)
	}
	out, err := nodewire.ComputeInfoToWire(info)
	if err != nil {
		return nil, fail(sandbox.OpGetCompute, errdefs.ErrContract)
	}
	return &pb.GetComputeResponse{Info: out}, nil
}

// Suspend forwards Suspend.
func (s *Server) Suspend(ctx context.Context, req *pb.SuspendRequest) (*pb.SuspendResponse, error) {
	r, err := nodewire.SuspendRequestFromWire(req)
	if err != nil {
		return nil, fail(sandbox.OpSuspend, err)
	}
	res, err := s.agent.Suspend(ctx, r)
	if err != nil {
		return nil, fail(sandbox.OpSuspend, err)
	}
	out, err := nodewire.SuspendResultToWire(res)
	if err != nil {
		return nil, fail(sandbox.OpSuspend, errdefs.ErrContract)
	}
	return out, nil
}

// Resume forwards Resume.
func (s *Server) Resume(ctx context.Context, req *pb.ResumeRequest) (*pb.ResumeResponse, error) {
	r, err := nodewire.ResumeRequestFromWire(req)
	if err != nil {
		return nil, fail(sandbox.OpResume, err)
	}
	res, err := s.agent.Resume(ctx, r)
	if err != nil {
		return nil, fail(sandbox.OpResume, err)
	}
	out, err := nodewire.ResumeResultToWire(res)
	if err != nil {
		return nil, fail(sandbox.OpResume, errdefs.ErrContract)
	}
	return out, nil
}

// ResumeCompute forwards ResumeCompute.
func (s *Server) ResumeCompute(ctx context.Context, req *pb.ResumeComputeRequest) (*pb.ResumeComputeResponse, error) {
	c, err := nodewire.ComputeFromWire(req.GetCompute())
	if err != nil {
		return nil, fail(sandbox.OpResumeCompute, err)
	}
	info, err := s.agent.ResumeCompute(ctx, c)
	if err != nil {
		return nil, fail(sandbox.OpResumeCompute, err)
	}
	out, err := nodewire.ComputeInfoToWire(info)
	if err != nil {
		return nil, fail(sandbox.OpResumeCompute, errdefs.ErrContract)
	}
	return &pb.ResumeComputeResponse{Info: out}, nil
}

// KillCompute forwards KillCompute.
func (s *Server) KillCompute(ctx context.Context, req *pb.KillComputeRequest) (*pb.KillComputeResponse, error) {
	c, err := nodewire.ComputeFromWire(req.GetCompute())
	if err != nil {
		return nil, fail(sandbox.OpKillCompute, err)
	}
	if err := s.agent.KillCompute(ctx, c); err != nil {
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
	if err := s.agent.DeleteSnapshot(ctx, ref, snap); err != nil {
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
	res, err := s.agent.RunCommandCompute(ctx, c, cmd)
	if err != nil {
		return nil, fail(sandbox.OpRunCommandCompute, err)
	}
	out, err := nodewire.CommandResultToWire(res)
	if err != nil {
		return nil, fail(sandbox.OpRunCommandCompute, errdefs.ErrContract)
	}
	return &pb.RunCommandComputeResponse{Result: out}, nil
}
