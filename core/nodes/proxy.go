package nodes

import (
	"context"
	"strconv"

	"google.golang.org/grpc/metadata"

	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/nodewire"
	"berth.dev/sandbox/providercontract"
)

// Reason codes of the operations the node transport does not carry.
const (
	ReasonTransportNoBatch      providercontract.ReasonCode = "node_transport_no_batch"
	ReasonTransportNoDiscovery  providercontract.ReasonCode = "node_transport_no_discovery"
	ReasonTransportNoCredential providercontract.ReasonCode = "node_transport_no_credential"
)

// ProxyOperations is a node's declaration as Core exposes it: the node's
// own decisions for every carried operation, and explicit unsupported
// decisions for the ones the transport does not carry.
func ProxyOperations(node providercontract.Operations) (providercontract.Operations, error) {
	ops := node.Clone()
	ops[sandbox.OpObserveBatch] = providercontract.Unsupported(ReasonTransportNoBatch)
	ops[sandbox.OpDiscoverSelection] = providercontract.Unsupported(ReasonTransportNoDiscovery)
	ops[sandbox.OpVerifyCredential] = providercontract.Unsupported(ReasonTransportNoCredential)
	if err := sandbox.ValidateOperations(ops); err != nil {
		return nil, err
	}
	return ops, nil
}

// Session is one established connection to a node: the client and the
// identity every call carries.
type Session struct {
	Client       pb.NodeServiceClient
	ConnectionID string
	OwnerEpoch   uint64
	Generation   uint64
}

func (s *Session) outgoing(ctx context.Context) context.Context {
	return metadata.NewOutgoingContext(ctx, metadata.Pairs(
		pb.MetadataProtocolVersion, pb.ProtocolVersion,
		pb.MetadataConnectionID, s.ConnectionID,
		pb.MetadataOwnerEpoch, strconv.FormatUint(s.OwnerEpoch, 10),
		pb.MetadataGeneration, strconv.FormatUint(s.Generation, 10),
	))
}

// Proxy is a remote node as a sandbox provider.
type Proxy struct {
	ops     providercontract.Operations
	resolve func(context.Context) (*Session, error)
}

var (
	_ sandbox.SandboxProvider        = (*Proxy)(nil)
	_ sandbox.CheckpointProvider     = (*Proxy)(nil)
	_ sandbox.ObservationSource      = (*Proxy)(nil)
	_ sandbox.BatchObservationSource = (*Proxy)(nil)
)

// NewProxy returns a proxy for a node that declared nodeOps (from its
// Hello). It resolves the node's current session with resolve for every
// call.
func NewProxy(nodeOps providercontract.Operations, resolve func(context.Context) (*Session, error)) (*Proxy, error) {
	ops, err := ProxyOperations(nodeOps)
	if err != nil {
		return nil, err
	}
	return &Proxy{ops: ops, resolve: resolve}, nil
}

// ProviderOperations returns the proxy's declaration.
func (p *Proxy) ProviderOperations() providercontract.Operations { return p.ops.Clone() }

// session admits op from the declaration, then resolves the session. A
// node without a session is unavailable and nothing was sent.
func (p *Proxy) session(ctx context.Context, op providercontract.Operation) (*Session, error) {
	if err := p.ops.Check(op); err != nil {
		return nil, err
	}
	s, err := p.resolve(ctx)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Create forwards Create. A failure may carry reference-bound settlement
// evidence, returned with the error; a transport failure is an unknown
// outcome and Create is never resent.
func (p *Proxy) Create(ctx context.Context, req sandbox.CreateRequest) (sandbox.Info, error) {
	s, err := p.session(ctx, sandbox.OpCreate)
	if err != nil {
		return sandbox.Info{}, err
	}
	if err := req.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	wire, err := nodewire.CreateRequestToWire(req)
	if err != nil {
		return sandbox.Info{}, err
	}
	resp, err := s.Client.Create(s.outgoing(ctx), wire)
	if err != nil {
		info, _ := nodewire.CreateFailureInfo(err)
		if info.CheckFor(req.Reference) != nil {
			info = sandbox.Info{}
		}
		return info, nodewire.FromError(sandbox.OpCreate, err)
	}
	return p.info(sandbox.OpCreate, req.Reference, resp.GetInfo())
}

func (p *Proxy) info(op providercontract.Operation, ref sandbox.Reference, m *pb.Info) (sandbox.Info, error) {
	info, err := nodewire.InfoFromWire(m)
	if err != nil {
		return sandbox.Info{}, nodewire.MalformedResponse(op, err)
	}
	if err := info.CheckFor(ref); err != nil {
		return sandbox.Info{}, nodewire.MalformedResponse(op, err)
	}
	return info, nil
}

// GetInfo forwards GetInfo.
func (p *Proxy) GetInfo(ctx context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	s, err := p.session(ctx, sandbox.OpGetInfo)
	if err != nil {
		return sandbox.Info{}, err
	}
	if err := ref.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	resp, err := s.Client.GetInfo(s.outgoing(ctx), &pb.GetInfoRequest{Reference: nodewire.ReferenceToWire(ref)})
	if err != nil {
		return sandbox.Info{}, nodewire.FromError(sandbox.OpGetInfo, err)
	}
	return p.info(sandbox.OpGetInfo, ref, resp.GetInfo())
}

// Renew forwards Renew.
func (p *Proxy) Renew(ctx context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	s, err := p.session(ctx, sandbox.OpRenew)
	if err != nil {
		return sandbox.Info{}, err
	}
	if err := ref.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	resp, err := s.Client.Renew(s.outgoing(ctx), &pb.RenewRequest{Reference: nodewire.ReferenceToWire(ref)})
	if err != nil {
		return sandbox.Info{}, nodewire.FromError(sandbox.OpRenew, err)
	}
	return p.info(sandbox.OpRenew, ref, resp.GetInfo())
}

// Kill forwards Kill.
func (p *Proxy) Kill(ctx context.Context, ref sandbox.Reference) error {
	s, err := p.session(ctx, sandbox.OpKill)
	if err != nil {
		return err
	}
	if err := ref.Validate(); err != nil {
		return err
	}
	_, err = s.Client.Kill(s.outgoing(ctx), &pb.KillRequest{Reference: nodewire.ReferenceToWire(ref)})
	return nodewire.FromError(sandbox.OpKill, err)
}

// RunCommand forwards RunCommand; stdin travels only in the request body.
func (p *Proxy) RunCommand(ctx context.Context, ref sandbox.Reference, cmd sandbox.Command) (sandbox.CommandResult, error) {
	s, err := p.session(ctx, sandbox.OpRunCommand)
	if err != nil {
		return sandbox.CommandResult{}, err
	}
	if err := ref.Validate(); err != nil {
		return sandbox.CommandResult{}, err
	}
	wire, err := nodewire.CommandToWire(cmd)
	if err != nil {
		return sandbox.CommandResult{}, err
	}
	resp, err := s.Client.RunCommand(s.outgoing(ctx), &pb.RunCommandRequest{Reference: nodewire.ReferenceToWire(ref), Command: wire})
	if err != nil {
		return sandbox.CommandResult{}, nodewire.FromError(sandbox.OpRunCommand, err)
	}
	res, err := nodewire.CommandResultFromWire(resp.GetResult())
	if err != nil {
		return sandbox.CommandResult{}, nodewire.MalformedResponse(sandbox.OpRunCommand, err)
	}
	return res, nil
}

// Observe forwards Observe.
func (p *Proxy) Observe(ctx context.Context, ref sandbox.Reference) (sandbox.Observation, error) {
	s, err := p.session(ctx, sandbox.OpObserve)
	if err != nil {
		return sandbox.Observation{}, err
	}
	if err := ref.Validate(); err != nil {
		return sandbox.Observation{}, err
	}
	resp, err := s.Client.Observe(s.outgoing(ctx), &pb.ObserveRequest{Reference: nodewire.ReferenceToWire(ref)})
	if err != nil {
		return sandbox.Observation{}, nodewire.FromError(sandbox.OpObserve, err)
	}
	obs, err := nodewire.ObservationFromWire(resp)
	if err != nil || obs.Reference != ref {
		return sandbox.Observation{}, nodewire.MalformedResponse(sandbox.OpObserve, err)
	}
	return obs, nil
}

// ObserveBatch is not carried by the node transport.
func (p *Proxy) ObserveBatch(context.Context, []sandbox.Reference) ([]sandbox.ObservationResult, error) {
	return nil, p.ops.Check(sandbox.OpObserveBatch)
}

// DiscoverSelection is not carried by the node transport.
func (p *Proxy) DiscoverSelection(context.Context, sandbox.NativeConfiguration) (sandbox.NativeConfiguration, error) {
	return nil, p.ops.Check(sandbox.OpDiscoverSelection)
}

// VerifyCredential is not carried by the node transport.
func (p *Proxy) VerifyCredential(context.Context, sandbox.NativeConfiguration) error {
	return p.ops.Check(sandbox.OpVerifyCredential)
}
