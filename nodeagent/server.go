package nodeagent

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	"berth.dev/platform/errgrpc"
	"berth.dev/platform/nodewire"
	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// Description is what Hello reports about the node itself.
type Description struct {
	NodeID       string
	ProviderKind string
	// Operations is the adapter's declaration (its registration's, the
	// same for every generation).
	Operations providercontract.Operations
}

// Server is the gRPC NodeService: a thin layer that checks every call's
// metadata, routes it to the Agent of the generation it names, converts
// with nodewire and delegates.
type Server struct {
	pb.UnimplementedNodeServiceServer

	gens     *Generations
	fence    *Fence
	desc     Description
	capacity func() Capacity
	interval time.Duration
	now      func() time.Time
	// stallHealth is the fault hook FaultStallHealthEnv: each Connect
	// stream sends its first report and then none.
	stallHealth bool

	stopping chan struct{}
	stopOnce sync.Once
}

// Shutdown ends every Connect stream, so that a graceful stop does not wait
// for Core to hang up. Unary calls in flight finish normally.
func (s *Server) Shutdown() { s.stopOnce.Do(func() { close(s.stopping) }) }

// NewServer returns the service over the served generations gens,
// admitting calls through fence. capacity is the node's capacity
// (CapacityMeter.Measure), run for Hello and every health report, which
// also probes every served generation.
func NewServer(gens *Generations, fence *Fence, desc Description, capacity func() Capacity, interval time.Duration) (*Server, error) {
	if err := sandbox.ValidateOperations(desc.Operations); err != nil {
		return nil, err
	}
	return &Server{
		gens: gens, fence: fence, desc: desc, capacity: capacity,
		interval: interval, now: time.Now, stopping: make(chan struct{}),
	}, nil
}

// Register registers the service and its interceptors' checks on gs. The
// caller must build gs with Server.Options.
func (s *Server) Register(gs *grpc.Server) { pb.RegisterNodeServiceServer(gs, s) }

// errMalformed answers a request body that is not a well-formed message
// of the method's request type.
var errMalformed = errdefs.Invalid("request", "not a well-formed protobuf message of the method's request type")

// Options are the grpc.Server options that refuse a malformed body with
// the node protocol's invalid code (errgrpc.Decoder; its interceptors come
// first, so no refusal leaves a record behind) and check every call's
// metadata before any handler runs.
func (s *Server) Options() []grpc.ServerOption {
	dec := errgrpc.NewDecoder(0, func() error { return nodewire.ToStatus(errMalformed) })
	return append(dec.ServerOptions(),
		grpc.ChainUnaryInterceptor(s.unaryCheck),
		grpc.ChainStreamInterceptor(s.streamCheck),
	)
}

type callMeta struct {
	version    string
	connection string
	epoch      uint64
	generation uint64
}

func readMeta(ctx context.Context) (callMeta, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	one := func(key string) string {
		if v := md.Get(key); len(v) == 1 {
			return v[0]
		}
		return ""
	}
	m := callMeta{version: one(pb.MetadataProtocolVersion), connection: one(pb.MetadataConnectionID)}
	if m.version != pb.ProtocolVersion {
		return m, errdefs.ErrProtocolMismatch
	}
	var err error
	if m.epoch, err = strconv.ParseUint(one(pb.MetadataOwnerEpoch), 10, 64); err != nil {
		return m, errdefs.Invalid("metadata."+pb.MetadataOwnerEpoch, "must be an unsigned integer")
	}
	if m.generation, err = strconv.ParseUint(one(pb.MetadataGeneration), 10, 64); err != nil {
		return m, errdefs.Invalid("metadata."+pb.MetadataGeneration, "must be an unsigned integer")
	}
	if m.connection == "" {
		return m, errdefs.Invalid("metadata."+pb.MetadataConnectionID, "required")
	}
	return m, nil
}

// agentKey carries the Agent of the call's generation from unaryCheck to
// the handler.
type agentKey struct{}

// agent returns the Agent unaryCheck routed the call to.
func agent(ctx context.Context) *Agent { return ctx.Value(agentKey{}).(*Agent) }

// errNotServed fences a call for a generation the node does not serve:
// Core publishes a generation (ServeGenerations) before it calls for it.
var errNotServed = fmt.Errorf("generation not served by this node: %w", errdefs.ErrFenced)

func (s *Server) unaryCheck(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if info.FullMethod == pb.NodeService_Hello_FullMethodName {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get(pb.MetadataProtocolVersion); len(v) != 1 || v[0] != pb.ProtocolVersion {
			return nil, nodewire.ToStatus(errdefs.ErrProtocolMismatch)
		}
		return handler(ctx, req)
	}
	m, err := readMeta(ctx)
	if err == nil {
		err = s.fence.Check(m.connection, m.epoch)
	}
	if err != nil {
		return nil, nodewire.ToStatus(err)
	}
	if info.FullMethod == pb.NodeService_ServeGenerations_FullMethodName {
		return handler(ctx, req)
	}
	// An operation the backend declares unsupported is answered here,
	// before its request is even decoded. ObserveBatch is the protocol's
	// batched GetInfo, not the adapter's usage ObserveBatch: GetInfo's
	// decision is its own.
	op := providercontract.Operation(path.Base(info.FullMethod))
	if info.FullMethod == pb.NodeService_ObserveBatch_FullMethodName {
		op = sandbox.OpGetInfo
	}
	if err := s.desc.Operations.Check(op); err != nil {
		return nil, fail(op, err)
	}
	a, ok := s.gens.Agent(m.generation)
	if !ok {
		return nil, nodewire.ToStatus(errNotServed)
	}
	return handler(context.WithValue(ctx, agentKey{}, a), req)
}

func (s *Server) streamCheck(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	switch info.FullMethod {
	case pb.NodeService_ExportSnapshot_FullMethodName, pb.NodeService_ImportSnapshot_FullMethodName:
		return s.seedStreamCheck(srv, ss, info, handler)
	case pb.NodeService_Connect_FullMethodName:
	default:
		return nodewire.ToStatus(errdefs.ErrContract)
	}
	m, err := readMeta(ss.Context())
	if err == nil {
		err = s.fence.Connect(m.connection, m.epoch)
	}
	if err != nil {
		return nodewire.ToStatus(err)
	}
	defer s.fence.Disconnect(m.connection)
	return handler(srv, ss)
}

// seedStreamCheck is unaryCheck for a fork seed's two streams: the
// fencing metadata on the stream's open, the declaration, and the agent of
// the call's generation in the stream's context.
func (s *Server) seedStreamCheck(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	m, err := readMeta(ss.Context())
	if err == nil {
		err = s.fence.Check(m.connection, m.epoch)
	}
	if err != nil {
		return nodewire.ToStatus(err)
	}
	op := providercontract.Operation(path.Base(info.FullMethod))
	if err := s.desc.Operations.Check(op); err != nil {
		return fail(op, err)
	}
	a, ok := s.gens.Agent(m.generation)
	if !ok {
		return nodewire.ToStatus(errNotServed)
	}
	return handler(srv, agentStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), agentKey{}, a)})
}

// agentStream is a stream whose context carries the call's Agent.
type agentStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (a agentStream) Context() context.Context { return a.ctx }

// ExportSnapshot streams a snapshot's archive in chunks of at most
// nodewire.MaxSnapshotChunk.
func (s *Server) ExportSnapshot(req *pb.ExportSnapshotRequest, stream grpc.ServerStreamingServer[pb.ExportSnapshotResponse]) error {
	owner, snap, err := nodewire.ExportRequestFromWire(req)
	if err != nil {
		return fail(sandbox.OpExportSnapshot, err)
	}
	ctx := stream.Context()
	w := &chunkWriter{send: func(b []byte) error { return stream.Send(&pb.ExportSnapshotResponse{Data: b}) }}
	if err := agent(ctx).ExportSnapshot(ctx, owner, snap, w); err != nil {
		return fail(sandbox.OpExportSnapshot, err)
	}
	if err := w.flush(); err != nil {
		return fail(sandbox.OpExportSnapshot, err)
	}
	return nil
}

// ImportSnapshot reads the header, then the archive's chunks, into the
// adapter's ImportSnapshot.
func (s *Server) ImportSnapshot(stream grpc.ClientStreamingServer[pb.ImportSnapshotRequest, pb.ImportSnapshotResponse]) error {
	first, err := stream.Recv()
	if err != nil {
		return fail(sandbox.OpImportSnapshot, errdefs.Invalid("header", "is required"))
	}
	req, err := nodewire.ImportHeaderFromWire(first)
	if err != nil {
		return fail(sandbox.OpImportSnapshot, err)
	}
	ctx := stream.Context()
	r := &chunkReader{recv: func() ([]byte, error) {
		m, err := stream.Recv()
		if err != nil {
			return nil, err
		}
		if m.GetHeader() != nil || len(m.GetData()) > nodewire.MaxSnapshotChunk {
			return nil, errdefs.Invalid("data", "a second header or a chunk over 1 MiB")
		}
		return m.GetData(), nil
	}}
	snap, err := agent(ctx).ImportSnapshot(ctx, req, r)
	if err != nil {
		return fail(sandbox.OpImportSnapshot, err)
	}
	return stream.SendAndClose(nodewire.ImportResultToWire(snap))
}

// Hello describes the node and the generations it serves.
func (s *Server) Hello(context.Context, *pb.HelloRequest) (*pb.HelloResponse, error) {
	ops, err := nodewire.OperationsToWire(s.desc.Operations)
	if err != nil {
		return nil, nodewire.ToStatus(err)
	}
	return &pb.HelloResponse{
		ProtocolVersion:   pb.ProtocolVersion,
		NodeId:            s.desc.NodeID,
		ProviderKind:      s.desc.ProviderKind,
		Operations:        ops,
		Capacity:          capacityToWire(s.capacity()),
		HighestOwnerEpoch: s.fence.state.HighestEpoch(),
		Generations:       s.gens.Statuses(),
	}, nil
}

// ServeGenerations makes the published set the served one and answers
// every served generation's status.
func (s *Server) ServeGenerations(ctx context.Context, req *pb.ServeGenerationsRequest) (*pb.ServeGenerationsResponse, error) {
	want := make([]nodewire.Generation, 0, len(req.GetGenerations()))
	for _, m := range req.GetGenerations() {
		g, err := nodewire.GenerationFromWire(m)
		if err != nil {
			return nil, nodewire.ToStatus(err)
		}
		want = append(want, g)
	}
	st, err := s.gens.Serve(ctx, want)
	if err != nil {
		return nil, nodewire.ToStatus(err)
	}
	return &pb.ServeGenerationsResponse{Generations: st}, nil
}

// Connect streams health reports on Core's current connection until the
// stream ends or the connection is superseded.
func (s *Server) Connect(_ *pb.ConnectRequest, stream grpc.ServerStreamingServer[pb.ConnectResponse]) error {
	ctx := stream.Context()
	m, _ := readMeta(ctx)
	ticker := time.NewTicker(s.interval)
	defer ticker.Stop()
	for {
		if err := s.fence.Check(m.connection, m.epoch); err != nil {
			return nodewire.ToStatus(err)
		}
		report := &pb.ConnectResponse{
			ObservedAt:       timestamppb.New(s.now()),
			Generations:      s.gens.Probe(ctx),
			Capacity:         capacityToWire(s.capacity()),
			ActiveOperations: uint32(s.gens.Active()),
		}
		report.CreationReceiptsHeld = uint32(s.gens.ReceiptsHeld())
		if err := stream.Send(report); err != nil {
			return err
		}
		if s.stallHealth {
			// Fault injection (FaultStallHealthEnv): the stream stays open
			// and sends nothing more.
			select {
			case <-ctx.Done():
			case <-s.stopping:
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.stopping:
			return nil
		case <-ticker.C:
		}
	}
}

func capacityToWire(c Capacity) *pb.Capacity {
	return &pb.Capacity{CpuMillis: c.CPUMillis, MemoryBytes: c.MemoryBytes, DiskFreeBytes: c.DiskFreeBytes}
}

func fail(op providercontract.Operation, err error) error { return nodewire.ToStatusFor(op, err) }

// Create forwards Create; a failure keeps its settlement evidence.
func (s *Server) Create(ctx context.Context, req *pb.CreateRequest) (*pb.CreateResponse, error) {
	r, err := nodewire.CreateRequestFromWire(req)
	if err != nil {
		return nil, fail(sandbox.OpCreate, err)
	}
	info, err := agent(ctx).Create(ctx, r)
	if err != nil {
		return nil, nodewire.CreateStatus(info, err)
	}
	out, err := nodewire.InfoToWire(info)
	if err != nil {
		return nil, fail(sandbox.OpCreate, errdefs.ErrContract)
	}
	return &pb.CreateResponse{Info: out}, nil
}

// CreateSeeded forwards CreateSeeded like Create.
func (s *Server) CreateSeeded(ctx context.Context, req *pb.CreateSeededRequest) (*pb.CreateSeededResponse, error) {
	r, err := nodewire.SeededCreateRequestFromWire(req)
	if err != nil {
		return nil, fail(sandbox.OpCreateSeeded, err)
	}
	info, err := agent(ctx).CreateSeeded(ctx, r)
	if err != nil {
		return nil, nodewire.CreateStatus(info, err)
	}
	out, err := nodewire.InfoToWire(info)
	if err != nil {
		return nil, fail(sandbox.OpCreateSeeded, errdefs.ErrContract)
	}
	return &pb.CreateSeededResponse{Info: out}, nil
}

func (s *Server) observeInfo(ctx context.Context, op providercontract.Operation, ref *pb.Reference,
	call func(context.Context, sandbox.Reference) (sandbox.Info, error)) (*pb.Info, error) {
	return forward(ctx, op, func() (sandbox.Reference, error) { return nodewire.ReferenceFromWire(ref) }, call, nodewire.InfoToWire)
}

// forward is the shape of the forwarding RPCs: decode the request, call
// the Agent, encode its answer. A request that does not decode and a
// failed call are op's errors; an answer that does not encode is the
// adapter breaking the contract.
func forward[In, Out, Resp any](ctx context.Context, op providercontract.Operation, decode func() (In, error),
	call func(context.Context, In) (Out, error), encode func(Out) (Resp, error)) (Resp, error) {
	var none Resp
	in, err := decode()
	if err != nil {
		return none, fail(op, err)
	}
	out, err := call(ctx, in)
	if err != nil {
		return none, fail(op, err)
	}
	resp, err := encode(out)
	if err != nil {
		return none, fail(op, errdefs.ErrContract)
	}
	return resp, nil
}

// GetInfo forwards GetInfo.
func (s *Server) GetInfo(ctx context.Context, req *pb.GetInfoRequest) (*pb.GetInfoResponse, error) {
	info, err := s.observeInfo(ctx, sandbox.OpGetInfo, req.GetReference(), agent(ctx).GetInfo)
	if err != nil {
		return nil, err
	}
	return &pb.GetInfoResponse{Info: info}, nil
}

// Renew forwards Renew.
func (s *Server) Renew(ctx context.Context, req *pb.RenewRequest) (*pb.RenewResponse, error) {
	info, err := s.observeInfo(ctx, sandbox.OpRenew, req.GetReference(), agent(ctx).Renew)
	if err != nil {
		return nil, err
	}
	return &pb.RenewResponse{Info: info}, nil
}

// Kill forwards Kill.
func (s *Server) Kill(ctx context.Context, req *pb.KillRequest) (*pb.KillResponse, error) {
	r, err := nodewire.ReferenceFromWire(req.GetReference())
	if err != nil {
		return nil, fail(sandbox.OpKill, err)
	}
	if err := agent(ctx).Kill(ctx, sandbox.KillRequest{Reference: r, CreateSettled: req.GetCreateSettled()}); err != nil {
		return nil, fail(sandbox.OpKill, err)
	}
	return &pb.KillResponse{}, nil
}

// RunCommand forwards RunCommand.
func (s *Server) RunCommand(ctx context.Context, req *pb.RunCommandRequest) (*pb.RunCommandResponse, error) {
	r, err := nodewire.ReferenceFromWire(req.GetReference())
	if err != nil {
		return nil, fail(sandbox.OpRunCommand, err)
	}
	cmd, err := nodewire.CommandFromWire(req.GetCommand())
	if err != nil {
		return nil, fail(sandbox.OpRunCommand, err)
	}
	res, err := agent(ctx).RunCommand(ctx, r, cmd)
	if err != nil {
		return nil, fail(sandbox.OpRunCommand, err)
	}
	out, err := nodewire.CommandResultToWire(res)
	if err != nil {
		return nil, fail(sandbox.OpRunCommand, errdefs.ErrContract)
	}
	return &pb.RunCommandResponse{Result: out}, nil
}

// Observe forwards Observe.
func (s *Server) Observe(ctx context.Context, req *pb.ObserveRequest) (*pb.ObserveResponse, error) {
	return forward(ctx, sandbox.OpObserve,
		func() (sandbox.Reference, error) { return nodewire.ReferenceFromWire(req.GetReference()) },
		agent(ctx).Observe, nodewire.ObservationToWire)
}

// ObserveBatch answers GetInfo for each requested Reference (1 to
// sandbox.MaxObservationBatch, distinct) in input order, each target's
// failure as its own error (Agent.GetInfoBatch). The call fails only for
// an invalid request; an answer the adapter breaks the contract with is
// that target's unknown outcome.
func (s *Server) ObserveBatch(ctx context.Context, req *pb.ObserveBatchRequest) (*pb.ObserveBatchResponse, error) {
	wire := req.GetReferences()
	if len(wire) == 0 || len(wire) > sandbox.MaxObservationBatch {
		return nil, fail(sandbox.OpObserveBatch, errdefs.Invalid("references", "must hold 1 to 64 references"))
	}
	refs := make([]sandbox.Reference, len(wire))
	seen := make(map[string]bool, len(wire))
	for i, m := range wire {
		r, err := nodewire.ReferenceFromWire(m)
		if err != nil {
			return nil, fail(sandbox.OpObserveBatch, errdefs.Invalid("references", "must be valid references"))
		}
		if seen[r.AllocationID] {
			return nil, fail(sandbox.OpObserveBatch, errdefs.Invalid("references", "must name distinct allocations"))
		}
		seen[r.AllocationID] = true
		refs[i] = r
	}
	infos, errs := agent(ctx).GetInfoBatch(ctx, refs)
	out := &pb.ObserveBatchResponse{Results: make([]*pb.ObserveBatchResult, len(refs))}
	for i := range refs {
		res := &pb.ObserveBatchResult{}
		if errs[i] == nil {
			m, err := nodewire.InfoToWire(infos[i])
			if err != nil {
				errs[i] = errdefs.ErrContract
			}
			res.Info = m
		}
		if errs[i] != nil {
			res.Info, res.Error = nil, nodewire.TargetErrorToWire(sandbox.OpGetInfo, errs[i])
		}
		out.Results[i] = res
	}
	return out, nil
}
