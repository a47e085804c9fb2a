package nodes

import (
	"context"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"berth.dev/platform/nodewire"
	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
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
	// Generation is what a Proxy without a GenerationFunc calls for (a
	// test's single generation); Core's proxies call for each
	// allocation's own.
	Generation uint64
}

// outgoing is ctx with the metadata of a call on s for generation: a call
// about an allocation carries the allocation's; Connect and
// ServeGenerations carry 0.
func (s *Session) outgoing(ctx context.Context, generation uint64) context.Context {
	return metadata.NewOutgoingContext(ctx, metadata.Pairs(
		pb.MetadataProtocolVersion, pb.ProtocolVersion,
		pb.MetadataConnectionID, s.ConnectionID,
		pb.MetadataOwnerEpoch, strconv.FormatUint(s.OwnerEpoch, 10),
		pb.MetadataGeneration, strconv.FormatUint(generation, 10),
	))
}

// GenerationFunc returns the committed deployment generation of each
// allocation refs name, at its index (Core reads the allocations from its
// store in one query), with a per-reference error where one cannot be
// called for. A reference with an error, and every one on the call's own
// error, is sent nothing.
type GenerationFunc func(ctx context.Context, refs []sandbox.Reference) (gens []uint64, errs []error, err error)

// Proxy is a remote node as a sandbox provider. Every call is about one
// allocation (its reference, or the reference of its compute) and carries
// that allocation's committed generation, not the node's own: a node that
// serves another generation refuses the call at its generation fence
// before its adapter is touched.
type Proxy struct {
	ops          providercontract.Operations
	resolve      func(context.Context) (*Session, error)
	generationOf GenerationFunc
}

var (
	_ sandbox.SandboxProvider        = (*Proxy)(nil)
	_ sandbox.CheckpointProvider     = (*Proxy)(nil)
	_ sandbox.ObservationSource      = (*Proxy)(nil)
	_ sandbox.BatchObservationSource = (*Proxy)(nil)
)

// NewProxy returns a proxy for a node that declared nodeOps (from its
// Hello). It resolves the node's current session with resolve and the
// generation of the allocation a call is about with generationOf for
// every call. Core's manager always passes generationOf; nil (a harness
// without Core's store) makes calls carry the session's generation.
func NewProxy(nodeOps providercontract.Operations, resolve func(context.Context) (*Session, error), generationOf GenerationFunc) (*Proxy, error) {
	ops, err := ProxyOperations(nodeOps)
	if err != nil {
		return nil, err
	}
	return &Proxy{ops: ops, resolve: resolve, generationOf: generationOf}, nil
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

// outgoing is the metadata of a call on s about ref: the generation is
// ref's allocation's (generationOf).
func (p *Proxy) outgoing(ctx context.Context, s *Session, ref sandbox.Reference) (context.Context, error) {
	if p.generationOf == nil {
		return s.outgoing(ctx, s.Generation), nil
	}
	gens, errs, err := p.generationOf(ctx, []sandbox.Reference{ref})
	switch {
	case err != nil:
		return nil, err
	case len(gens) != 1 || len(errs) != 1:
		return nil, errdefs.ErrObservationUnavailable
	case errs[0] != nil:
		return nil, errs[0]
	}
	return s.outgoing(ctx, gens[0]), nil
}

// Create forwards Create. It does not validate req: its caller (the
// lifecycle worker, before its claim) has, and the node agent validates it
// again where it leaves the wire, so an invalid request is refused as
// ErrInvalid either way. A failure may carry reference-bound settlement
// evidence, returned with the error; a transport failure is an unknown
// outcome and Create is never resent.
func (p *Proxy) Create(ctx context.Context, req sandbox.CreateRequest) (sandbox.Info, error) {
	s, err := p.session(ctx, sandbox.OpCreate)
	if err != nil {
		return sandbox.Info{}, err
	}
	wire, err := nodewire.CreateRequestToWire(req)
	if err != nil {
		return sandbox.Info{}, err
	}
	octx, err := p.outgoing(ctx, s, req.Reference)
	if err != nil {
		return sandbox.Info{}, err
	}
	resp, err := s.Client.Create(octx, wire)
	if err != nil {
		info, _ := nodewire.CreateFailureInfo(err)
		if info.CheckFor(req.Reference) != nil {
			info = sandbox.Info{}
		}
		return info, nodewire.FromError(sandbox.OpCreate, err)
	}
	return p.info(sandbox.OpCreate, req.Reference, resp.GetInfo())
}

// ReasonNodeProtocolNoSeed is the reason of the UnsupportedError the proxy
// answers CreateSeeded with when the node agent has no CreateSeeded RPC
// (a v1/5 agent built before it; ReasonNodeProtocolNoCapture's rule).
const ReasonNodeProtocolNoSeed providercontract.ReasonCode = "node_protocol_no_seed"

// CreateSeeded forwards CreateSeeded like Create: a failure keeps the
// settlement evidence of the child's Reference. An agent without the RPC
// answers gRPC's own UNIMPLEMENTED, which runs nothing: that answer alone
// is UnsupportedError ReasonNodeProtocolNoSeed.
func (p *Proxy) CreateSeeded(ctx context.Context, req sandbox.SeededCreateRequest) (sandbox.Info, error) {
	ref := req.Create.Reference
	s, err := p.session(ctx, sandbox.OpCreateSeeded)
	if err != nil {
		return sandbox.Info{}, err
	}
	wire, err := nodewire.SeededCreateRequestToWire(req)
	if err != nil {
		return sandbox.Info{}, err
	}
	octx, err := p.outgoing(ctx, s, ref)
	if err != nil {
		return sandbox.Info{}, err
	}
	resp, err := s.Client.CreateSeeded(octx, wire)
	if err != nil {
		if unknownMethod(err, "CreateSeeded") {
			return sandbox.Info{}, &providercontract.UnsupportedError{Operation: sandbox.OpCreateSeeded, Code: ReasonNodeProtocolNoSeed}
		}
		info, _ := nodewire.CreateFailureInfo(err)
		if info.CheckFor(ref) != nil {
			info = sandbox.Info{}
		}
		return info, nodewire.FromError(sandbox.OpCreateSeeded, err)
	}
	return p.info(sandbox.OpCreateSeeded, ref, resp.GetInfo())
}

func (p *Proxy) info(op providercontract.Operation, ref sandbox.Reference, m *pb.Info) (sandbox.Info, error) {
	info, err := infoFor(ref, m)
	if err != nil {
		return sandbox.Info{}, nodewire.MalformedResponse(op, err)
	}
	return info, nil
}

// infoFor reads an Info response that must describe ref.
func infoFor(ref sandbox.Reference, m *pb.Info) (sandbox.Info, error) {
	info, err := nodewire.InfoFromWire(m)
	if err != nil {
		return sandbox.Info{}, err
	}
	if err := info.CheckFor(ref); err != nil {
		return sandbox.Info{}, err
	}
	return info, nil
}

// call makes one call of op about ref on the node's current session, in
// the order every forwarded operation keeps: the declaration and the
// session first (an unsupported or unreachable operation sends nothing),
// then the request (an invalid one sends nothing), then ref's generation
// (an unknown allocation sends nothing), then one send, whose failure is
// converted once (nodewire.FromError), and the read of its response, whose
// failure is op's unknown outcome (nodewire.MalformedResponse), never the
// caller's fault. Create does not use it: its failure carries evidence.
func call[Req, Resp, Out any](ctx context.Context, p *Proxy, op providercontract.Operation, ref sandbox.Reference,
	req func() (Req, error), send func(pb.NodeServiceClient, context.Context, Req, ...grpc.CallOption) (Resp, error),
	read func(Resp) (Out, error),
) (Out, error) {
	var zero Out
	s, err := p.session(ctx, op)
	if err != nil {
		return zero, err
	}
	r, err := req()
	if err != nil {
		return zero, err
	}
	octx, err := p.outgoing(ctx, s, ref)
	if err != nil {
		return zero, err
	}
	resp, err := send(s.Client, octx, r)
	if err != nil {
		return zero, nodewire.FromError(op, err)
	}
	out, err := read(resp)
	if err != nil {
		return zero, nodewire.MalformedResponse(op, err)
	}
	return out, nil
}

// onRef builds a request for ref once ref is valid.
func onRef[Req any](ref sandbox.Reference, build func(*pb.Reference) Req) func() (Req, error) {
	return func() (Req, error) {
		var zero Req
		if err := ref.Validate(); err != nil {
			return zero, err
		}
		return build(nodewire.ReferenceToWire(ref)), nil
	}
}

// done reads a response that carries nothing.
func done[Resp any](Resp) (struct{}, error) { return struct{}{}, nil }

// GetInfo forwards GetInfo.
func (p *Proxy) GetInfo(ctx context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	return call(ctx, p, sandbox.OpGetInfo, ref,
		onRef(ref, func(r *pb.Reference) *pb.GetInfoRequest { return &pb.GetInfoRequest{Reference: r} }),
		pb.NodeServiceClient.GetInfo,
		func(r *pb.GetInfoResponse) (sandbox.Info, error) { return infoFor(ref, r.GetInfo()) })
}

// Renew forwards Renew.
func (p *Proxy) Renew(ctx context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	return call(ctx, p, sandbox.OpRenew, ref,
		onRef(ref, func(r *pb.Reference) *pb.RenewRequest { return &pb.RenewRequest{Reference: r} }),
		pb.NodeServiceClient.Renew,
		func(r *pb.RenewResponse) (sandbox.Info, error) { return infoFor(ref, r.GetInfo()) })
}

// Kill forwards Kill with what Core knows of the creation.
func (p *Proxy) Kill(ctx context.Context, req sandbox.KillRequest) error {
	ref := req.Reference
	_, err := call(ctx, p, sandbox.OpKill, ref,
		onRef(ref, func(r *pb.Reference) *pb.KillRequest {
			return &pb.KillRequest{Reference: r, CreateSettled: req.CreateSettled}
		}),
		pb.NodeServiceClient.Kill, done[*pb.KillResponse])
	return err
}

// RunCommand forwards RunCommand; stdin travels only in the request body.
func (p *Proxy) RunCommand(ctx context.Context, ref sandbox.Reference, cmd sandbox.Command) (sandbox.CommandResult, error) {
	return call(ctx, p, sandbox.OpRunCommand, ref,
		func() (*pb.RunCommandRequest, error) {
			if err := ref.Validate(); err != nil {
				return nil, err
			}
			wire, err := nodewire.CommandToWire(cmd)
			return &pb.RunCommandRequest{Reference: nodewire.ReferenceToWire(ref), Command: wire}, err
		},
		pb.NodeServiceClient.RunCommand,
		func(r *pb.RunCommandResponse) (sandbox.CommandResult, error) {
			return nodewire.CommandResultFromWire(r.GetResult())
		})
}

// Observe forwards Observe.
func (p *Proxy) Observe(ctx context.Context, ref sandbox.Reference) (sandbox.Observation, error) {
	return call(ctx, p, sandbox.OpObserve, ref,
		onRef(ref, func(r *pb.Reference) *pb.ObserveRequest { return &pb.ObserveRequest{Reference: r} }),
		pb.NodeServiceClient.Observe,
		func(r *pb.ObserveResponse) (sandbox.Observation, error) {
			obs, err := nodewire.ObservationFromWire(r)
			if err == nil && obs.Reference != ref {
				err = errdefs.Invalid("reference", "is not the requested one")
			}
			return obs, err
		})
}

// GetInfoBatch reads the compute of up to sandbox.MaxObservationBatch
// distinct references in one node-protocol ObserveBatch call per
// generation among them (one, but for a deployment change), each target
// as GetInfo would: result i is refs[i]'s Info, checked to answer for it,
// or its own error. A target whose generation cannot be called for, or
// whose call failed, gets that error; a call's unsupported answer for
// ObserveBatch (a node that does not batch) is the returned error, the one
// that permits per-target GetInfo. Invalid references send nothing.
func (p *Proxy) GetInfoBatch(ctx context.Context, refs []sandbox.Reference) ([]sandbox.Info, []error, error) {
	s, err := p.session(ctx, sandbox.OpGetInfo)
	if err != nil {
		return nil, nil, err
	}
	if len(refs) == 0 || len(refs) > sandbox.MaxObservationBatch {
		return nil, nil, errdefs.Invalid("references", "must hold 1 to 64 references")
	}
	seen := make(map[string]bool, len(refs))
	for _, r := range refs {
		if err := r.Validate(); err != nil {
			return nil, nil, err
		}
		if seen[r.AllocationID] {
			return nil, nil, errdefs.Invalid("references", "must name distinct allocations")
		}
		seen[r.AllocationID] = true
	}
	infos, errs := make([]sandbox.Info, len(refs)), make([]error, len(refs))
	groups := map[uint64][]int{}
	var order []uint64
	if p.generationOf == nil {
		order = []uint64{s.Generation}
		for i := range refs {
			groups[s.Generation] = append(groups[s.Generation], i)
		}
	} else {
		gens, gerrs, err := p.generationOf(ctx, refs)
		if err != nil {
			return nil, nil, err
		}
		if len(gens) != len(refs) || len(gerrs) != len(refs) {
			return nil, nil, errdefs.ErrObservationUnavailable
		}
		for i, g := range gens {
			if errs[i] = gerrs[i]; errs[i] != nil {
				continue
			}
			if _, ok := groups[g]; !ok {
				order = append(order, g)
			}
			groups[g] = append(groups[g], i)
		}
	}
	for _, g := range order {
		if err := p.observeBatch(ctx, s, g, refs, groups[g], infos, errs); err != nil {
			return nil, nil, err
		}
	}
	return infos, errs, nil
}

// observeBatch makes one ObserveBatch call for the targets at idx, all of
// generation g, and puts each answer at its index. Only an unsupported
// answer for ObserveBatch is returned; any other failure of the call is
// each target's, as a failed GetInfo (a read: its unknown outcome is an
// unavailable observation).
func (p *Proxy) observeBatch(ctx context.Context, s *Session, g uint64, refs []sandbox.Reference, idx []int,
	infos []sandbox.Info, errs []error) error {
	req := &pb.ObserveBatchRequest{References: make([]*pb.Reference, len(idx))}
	for k, i := range idx {
		req.References[k] = nodewire.ReferenceToWire(refs[i])
	}
	resp, err := s.Client.ObserveBatch(s.outgoing(ctx, g), req)
	if err != nil {
		if e := nodewire.FromError(sandbox.OpObserveBatch, err); sandbox.IsUnsupportedOp(e, sandbox.OpObserveBatch) {
			return e
		}
		err = nodewire.FromError(sandbox.OpGetInfo, err)
	} else if len(resp.GetResults()) != len(idx) {
		err = nodewire.MalformedResponse(sandbox.OpGetInfo, errdefs.Invalid("results", "must answer every reference"))
	}
	for k, i := range idx {
		if err != nil {
			errs[i] = err
			continue
		}
		r := resp.GetResults()[k]
		switch {
		case r.GetError() != nil && r.GetInfo() == nil:
			errs[i] = nodewire.TargetErrorFromWire(sandbox.OpGetInfo, r.GetError())
		case r.GetError() == nil && r.GetInfo() != nil:
			if infos[i], errs[i] = infoFor(refs[i], r.GetInfo()); errs[i] != nil {
				errs[i] = nodewire.MalformedResponse(sandbox.OpGetInfo, errs[i])
			}
		default:
			errs[i] = nodewire.MalformedResponse(sandbox.OpGetInfo, errdefs.Invalid("results", "must hold exactly one of info and error"))
		}
	}
	return nil
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
