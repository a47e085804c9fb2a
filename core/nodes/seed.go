package nodes

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"

	"berth.dev/platform/nodewire"
	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/providercontract"
)

// ReasonNodeProtocolNoSeedTransfer is the reason of the UnsupportedError
// the proxy answers ExportSnapshot or ImportSnapshot with when the node
// agent has no such RPC (a v1/5 agent built before them;
// ReasonNodeProtocolNoCapture's rule).
const ReasonNodeProtocolNoSeedTransfer providercontract.ReasonCode = "node_protocol_no_seed_transfer"

// ExportSnapshot forwards ExportSnapshot: each chunk the node streams is
// written to w as it arrives. A failure is converted as for a read; an
// agent without the RPC is ReasonNodeProtocolNoSeedTransfer.
func (p *Proxy) ExportSnapshot(ctx context.Context, owner sandbox.Reference, s sandbox.SnapshotIdentity, w io.Writer) error {
	const op = sandbox.OpExportSnapshot
	sess, err := p.session(ctx, op)
	if err != nil {
		return err
	}
	octx, err := p.outgoing(ctx, sess, owner)
	if err != nil {
		return err
	}
	octx, cancel := context.WithCancel(octx)
	defer cancel()
	stream, err := sess.Client.ExportSnapshot(octx, nodewire.ExportRequestToWire(owner, s))
	if err != nil {
		return seedError(op, err, "ExportSnapshot")
	}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return seedError(op, err, "ExportSnapshot")
		}
		if _, err := w.Write(m.GetData()); err != nil {
			return err
		}
	}
}

// ImportSnapshot forwards ImportSnapshot, addressed with req.Via when set
// (a seed's owner is another node's allocation): the header, then r in chunks of
// at most nodewire.MaxSnapshotChunk (nothing after a Discard's header). A
// failure is converted as for a mutation (an interrupted stream is an
// unknown outcome); an agent without the RPC is
// ReasonNodeProtocolNoSeedTransfer.
func (p *Proxy) ImportSnapshot(ctx context.Context, req sandbox.ImportRequest, r io.Reader) (sandbox.SnapshotIdentity, error) {
	const op = sandbox.OpImportSnapshot
	// The declaration decides first, as for every call (an unsupported
	// operation is answered before its request is looked at).
	sess, err := p.session(ctx, op)
	if err != nil {
		return sandbox.SnapshotIdentity{}, err
	}
	if err := req.Validate(); err != nil {
		return sandbox.SnapshotIdentity{}, err
	}
	addr := req.Owner
	if !req.Via.IsZero() {
		addr = req.Via // Owner is another node's allocation (sandbox.ImportRequest)
	}
	octx, err := p.outgoing(ctx, sess, addr)
	if err != nil {
		return sandbox.SnapshotIdentity{}, err
	}
	octx, cancel := context.WithCancel(octx)
	defer cancel()
	stream, err := sess.Client.ImportSnapshot(octx)
	if err != nil {
		return sandbox.SnapshotIdentity{}, seedError(op, err, "ImportSnapshot")
	}
	if err := sendImport(stream, req, r); err != nil {
		return sandbox.SnapshotIdentity{}, err
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return sandbox.SnapshotIdentity{}, seedError(op, err, "ImportSnapshot")
	}
	if req.Discard {
		return sandbox.SnapshotIdentity{}, nil
	}
	snap, err := nodewire.SnapshotFromWire(resp.GetSnapshot())
	if err != nil {
		return sandbox.SnapshotIdentity{}, nodewire.MalformedResponse(op, err)
	}
	return snap, nil
}

// sendImport sends the header and r's chunks. A send the node ended
// (io.EOF) leaves the answer to CloseAndRecv; a read of r that fails is
// returned as it is, and the stream is cancelled by the caller.
func sendImport(stream grpc.ClientStreamingClient[pb.ImportSnapshotRequest, pb.ImportSnapshotResponse], req sandbox.ImportRequest, r io.Reader) error {
	if err := stream.Send(nodewire.ImportHeaderToWire(req)); err != nil {
		return nil // CloseAndRecv says why
	}
	if req.Discard || r == nil {
		return nil
	}
	buf := make([]byte, nodewire.MaxSnapshotChunk)
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if serr := stream.Send(&pb.ImportSnapshotRequest{Message: &pb.ImportSnapshotRequest_Data{Data: buf[:n]}}); serr != nil {
				return nil // CloseAndRecv says why
			}
		}
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			return nil
		case err != nil:
			return err
		}
	}
}

// seedError converts a seed stream's failure: an agent without method is
// ReasonNodeProtocolNoSeedTransfer, anything else op's as nodewire reads
// it.
func seedError(op providercontract.Operation, err error, method string) error {
	if unknownMethod(err, method) {
		return &providercontract.UnsupportedError{Operation: op, Code: ReasonNodeProtocolNoSeedTransfer}
	}
	return nodewire.FromError(op, err)
}
