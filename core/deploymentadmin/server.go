package deploymentadmin

import (
	"context"
	"time"

	"github.com/google/uuid"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/sandbox/errdefs"

	"berth.dev/core/admin"
	"berth.dev/core/audit"
	"berth.dev/core/deployment"
	"berth.dev/core/reset"
	"berth.dev/core/store"
)

// Server implements berth.admin.v1.DeploymentService over
// deployment.Service, and its resets over reset.Service.
type Server struct {
	adminv1.UnimplementedDeploymentServiceServer
	svc    *deployment.Service
	resets *reset.Service
}

// New returns the DeploymentService over s, its resets over r.
func New(s *deployment.Service, r *reset.Service) *Server { return &Server{svc: s, resets: r} }

// Register registers the service on g.
func (g *Server) Register(s *grpc.Server) { adminv1.RegisterDeploymentServiceServer(s, g) }

// GetDeployment reads the deployment.
func (g *Server) GetDeployment(ctx context.Context, req *adminv1.GetDeploymentRequest) (*adminv1.GetDeploymentResponse, error) {
	return onDeployment(req.GetName(), func() (deployment.Deployment, error) { return g.svc.Get(ctx) },
		func(pb *adminv1.Deployment) *adminv1.GetDeploymentResponse {
			return &adminv1.GetDeploymentResponse{Deployment: pb}
		})
}

// PreviewDeployment validates and normalizes a candidate, a complete one or one with an update_mask, and writes nothing.
func (g *Server) PreviewDeployment(ctx context.Context, req *adminv1.PreviewDeploymentRequest) (*adminv1.PreviewDeploymentResponse, error) {
	c, set, err := maskedCandidate(req.GetCandidate(), req.GetUpdateMask())
	if err != nil {
		return nil, err
	}
	var p deployment.Preview
	if set != nil {
		p, err = g.svc.PreviewReplacement(ctx, c, set)
	} else {
		p, err = g.svc.Preview(ctx, c)
	}
	return reply(p.Deployment, err, func(pb *adminv1.Deployment) *adminv1.PreviewDeploymentResponse {
		return &adminv1.PreviewDeploymentResponse{Deployment: pb, Changed: p.Changed, ExpectedGeneration: p.ExpectedGeneration}
	})
}

// ReplaceDeployment commits a candidate as a new generation over the expected one.
func (g *Server) ReplaceDeployment(ctx context.Context, req *adminv1.ReplaceDeploymentRequest) (*adminv1.ReplaceDeploymentResponse, error) {
	c, set, err := maskedCandidate(req.GetCandidate(), req.GetUpdateMask())
	if err != nil {
		return nil, err
	}
	r, err := g.svc.Replace(ctx, c, set, req.GetExpectedGeneration(), audit.From(ctx))
	return reply(r.Deployment, err, func(pb *adminv1.Deployment) *adminv1.ReplaceDeploymentResponse {
		out := &adminv1.ReplaceDeploymentResponse{
			Deployment: pb, Changed: r.Changed, RevokedEnrollmentTokens: r.RevokedTokens,
			AdmissionPause: durationpb.New(r.AdmissionPause),
		}
		for _, id := range r.RetiredNodes {
			out.RetiredNodes = append(out.RetiredNodes, admin.NodeName.Format(id.String()))
		}
		return out
	})
}

// CommitDeployment commits the first generation.
func (g *Server) CommitDeployment(ctx context.Context, req *adminv1.CommitDeploymentRequest) (*adminv1.CommitDeploymentResponse, error) {
	c, err := candidateFromProto(req.GetCandidate(), false)
	if err != nil {
		return nil, err
	}
	d, err := g.svc.Commit(ctx, c, req.GetExpectedGeneration())
	return reply(d, err, func(pb *adminv1.Deployment) *adminv1.CommitDeploymentResponse {
		return &adminv1.CommitDeploymentResponse{Deployment: pb}
	})
}

// DisableProvider stops new sandboxes of the provider.
func (g *Server) DisableProvider(ctx context.Context, req *adminv1.DisableProviderRequest) (*adminv1.DisableProviderResponse, error) {
	return onDeployment(req.GetName(), func() (deployment.Deployment, error) { return g.svc.Disable(ctx, audit.From(ctx)) },
		func(pb *adminv1.Deployment) *adminv1.DisableProviderResponse {
			return &adminv1.DisableProviderResponse{Deployment: pb}
		})
}

// EnableProvider lets the provider create sandboxes again.
func (g *Server) EnableProvider(ctx context.Context, req *adminv1.EnableProviderRequest) (*adminv1.EnableProviderResponse, error) {
	return onDeployment(req.GetName(), func() (deployment.Deployment, error) { return g.svc.Enable(ctx, audit.From(ctx)) },
		func(pb *adminv1.Deployment) *adminv1.EnableProviderResponse {
			return &adminv1.EnableProviderResponse{Deployment: pb}
		})
}

// StartReset starts a deployment reset; its request_id is the reset's.
func (g *Server) StartReset(ctx context.Context, req *adminv1.StartResetRequest) (*adminv1.StartResetResponse, error) {
	if err := admin.ValidateRequestID("request_id", req.GetRequestId()); err != nil {
		return nil, err
	}
	var timeout time.Duration
	if d := req.GetTimeout(); d != nil {
		if d.CheckValid() != nil {
			return nil, errdefs.Invalid("timeout", "must be a valid duration")
		}
		timeout = d.AsDuration()
		if timeout <= 0 {
			return nil, errdefs.Invalid("timeout", "must be positive")
		}
	}
	st, err := g.resets.Start(ctx, timeout, store.NewAdminProvenance(uuid.MustParse(req.GetRequestId())))
	if err != nil {
		return nil, err
	}
	return &adminv1.StartResetResponse{DeploymentReset: resetProto(st)}, nil
}

// GetReset reads a deployment reset ("resets/-": the latest).
func (g *Server) GetReset(ctx context.Context, req *adminv1.GetResetRequest) (*adminv1.GetResetResponse, error) {
	id := uuid.Nil
	if req.GetName() != admin.LatestReset {
		ids, err := admin.ValidateName("name", req.GetName(), admin.ResetName)
		if err != nil {
			return nil, err
		}
		id = uuid.MustParse(ids[0])
	}
	st, err := g.resets.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return &adminv1.GetResetResponse{DeploymentReset: resetProto(st)}, nil
}

// onDeployment serves a call on the resource name ("deployment"): it
// checks the name, runs call and replies with its Deployment.
func onDeployment[R any](name string, call func() (deployment.Deployment, error), wrap func(*adminv1.Deployment) R) (R, error) {
	if _, err := admin.ValidateName("name", name, admin.DeploymentName); err != nil {
		var zero R
		return zero, err
	}
	d, err := call()
	return reply(d, err, wrap)
}

// reply converts the logic's answer: its error with the logic's field
// names mapped to request paths, or its Deployment wrapped in the
// response.
func reply[R any](d deployment.Deployment, err error, wrap func(*adminv1.Deployment) R) (R, error) {
	var zero R
	if err != nil {
		return zero, requestPaths.Map(err)
	}
	pb, err := deploymentProto(d)
	if err != nil {
		return zero, err
	}
	return wrap(pb), nil
}

// candidateFromProto converts a request's candidate. An absent or empty
// credential object means no credential. A partial candidate (one with an
