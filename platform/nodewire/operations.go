package nodewire

import (
	"fmt"

	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// What an operation does, which decides the unknown outcome of a failure.
type kind uint8

const (
	kindMutation kind = iota + 1
	kindCommand
	kindRead
)

// carried lists the operations the node protocol carries, one RPC each, in
// the order of the NodeService definition. ObserveBatch, DiscoverSelection
// and VerifyCredential are not carried: the node proxy declares them
// unsupported itself. The protocol's own ObserveBatch RPC is not the
// adapters' usage ObserveBatch but GetInfo for a page of References
// (TargetErrorToWire): its targets' errors are GetInfo's.
var carried = []struct {
	op   providercontract.Operation
	kind kind
}{
	{sandbox.OpCreate, kindMutation},
	{sandbox.OpGetInfo, kindRead},
	// Renew extends a native lease: a mutation, even where a backend
	// without leases only observes.
	{sandbox.OpRenew, kindMutation},
	{sandbox.OpKill, kindMutation},
	{sandbox.OpRunCommand, kindCommand},
	{sandbox.OpObserve, kindRead},
	// Initial and NewCompute construct references without allocating.
	{sandbox.OpInitial, kindRead},
	{sandbox.OpNewCompute, kindRead},
	{sandbox.OpGetCompute, kindRead},
	{sandbox.OpSuspend, kindMutation},
	// Capture keeps its source but pauses it and writes a snapshot.
	{sandbox.OpCapture, kindMutation},
	// CreateSeeded creates a fork's child from a snapshot.
	{sandbox.OpCreateSeeded, kindMutation},
	// ExportSnapshot only reads a snapshot; ImportSnapshot makes one (a
	// fork's seed on another node).
	{sandbox.OpExportSnapshot, kindRead},
	{sandbox.OpImportSnapshot, kindMutation},
	{sandbox.OpResume, kindMutation},
	{sandbox.OpResumeCompute, kindMutation},
	{sandbox.OpKillCompute, kindMutation},
	{sandbox.OpDeleteSnapshot, kindMutation},
	{sandbox.OpRunCommandCompute, kindCommand},
}

// forkOperations are the checkpoint operations added to the protocol
// after its version (v1/5) was fixed, for fork.
var forkOperations = []providercontract.Operation{sandbox.OpCapture, sandbox.OpCreateSeeded, sandbox.OpExportSnapshot, sandbox.OpImportSnapshot}

var kinds = func() map[providercontract.Operation]kind {
	m := make(map[providercontract.Operation]kind, len(carried))
	for _, c := range carried {
		m[c.op] = c.kind
	}
	return m
}()

// CarriedOperations returns the 16 operations the node protocol carries,
// in the order of the NodeService definition. The caller may change the
// returned slice.
func CarriedOperations() []providercontract.Operation {
	out := make([]providercontract.Operation, len(carried))
	for i, c := range carried {
		out[i] = c.op
	}
	return out
}

// IsMutation reports whether op is a carried operation that may change
// compute or snapshots: Create, Renew, Kill, Suspend, Capture, Resume,
// ResumeCompute, KillCompute and DeleteSnapshot.
func IsMutation(op providercontract.Operation) bool { return kinds[op] == kindMutation }

// IsCommand reports whether op is a carried command operation: RunCommand
// and RunCommandCompute.
func IsCommand(op providercontract.Operation) bool { return kinds[op] == kindCommand }

// IsRead reports whether op is a carried operation that changes nothing:
// GetInfo, Observe, GetCompute, Initial and NewCompute.
func IsRead(op providercontract.Operation) bool { return kinds[op] == kindRead }

// UnknownOutcome returns the error class of a call of op whose outcome is
// unknown: ErrCommandUnconfirmed for a command, ErrObservationUnavailable
// for a read, and ErrComputeUnconfirmed for a mutation and for any
// operation the protocol does not carry (the conservative answer).
func UnknownOutcome(op providercontract.Operation) error {
	switch kinds[op] {
	case kindCommand:
		return errdefs.ErrCommandUnconfirmed
	case kindRead:
		return errdefs.ErrObservationUnavailable
	}
	return errdefs.ErrComputeUnconfirmed
}

// MalformedResponse is the client's error for a response of op that a
// FromWire conversion rejected (err). The call may have taken effect, so
// the error is of op's UnknownOutcome class, never ErrInvalid; it names the
// rejected field, which is an authored path, and nothing else.
func MalformedResponse(op providercontract.Operation, err error) error {
	field, ok := errdefs.Field(err)
	if !ok || !safeField(field) {
		field = "?"
	}
	return &Error{
		Operation: op,
		detail:    fmt.Sprintf("malformed response (field %s)", field),
		class:     UnknownOutcome(op),
	}
}

// OperationsToWire converts a complete declaration, sorted by operation. A
// declaration that fails sandbox.ValidateOperations fails with that
// ContractError (class ErrContract).
func OperationsToWire(decl providercontract.Operations) ([]*pb.OperationDecision, error) {
	if err := sandbox.ValidateOperations(decl); err != nil {
		return nil, err
	}
	out := make([]*pb.OperationDecision, 0, len(decl))
	for _, op := range decl.Sorted() {
		d := decl[op]
		out = append(out, &pb.OperationDecision{
			Operation: string(op),
			Supported: d.State == providercontract.StateSupported,
			Reason:    string(d.Reason),
		})
	}
	return out, nil
}

// OperationsFromWire converts and validates a declaration (paths
// "operations.*"). Nil or duplicate entries and a supported entry with a
// reason are invalid; a declaration without Capture (an agent older than
// it) takes Suspend's decision for it; the result must pass sandbox.ValidateOperations,
// whose failure is returned as an ErrInvalid FieldError ("operations") that
// also wraps the ContractError (providercontract.CodeOf reads its code).
func OperationsFromWire(m []*pb.OperationDecision) (providercontract.Operations, error) {
	const path = "operations"
	decl := make(providercontract.Operations, len(m))
	for _, e := range m {
		if e == nil {
			return nil, required(path)
		}
		op := providercontract.Operation(e.GetOperation())
		if _, dup := decl[op]; dup {
			return nil, errdefs.Invalid(sub(path, "operation"), "duplicate operation")
		}
		d := providercontract.Supported()
		if !e.GetSupported() {
			d = providercontract.Unsupported(providercontract.ReasonCode(e.GetReason()))
		} else if e.GetReason() != "" {
			return nil, errdefs.Invalid(sub(path, "reason"), "must be empty for a supported operation")
		}
		decl[op] = d
	}
	// A node agent older than Capture, CreateSeeded, ExportSnapshot or
	// ImportSnapshot (issue 33's fork:
	// the same protocol version, which an addition does not change)
	// declares neither. Each takes Suspend's decision, as the checkpoint
	// group's uniform rule would have it, so such an agent keeps its place
	// in a mixed-version installation; the proxy answers either call sent
	// to it from its UNIMPLEMENTED: node_protocol_no_capture,
	// node_protocol_no_seed and node_protocol_no_seed_transfer.
	if d, ok := decl[sandbox.OpSuspend]; ok {
		for _, op := range forkOperations {
			if _, declared := decl[op]; !declared {
				decl[op] = d
			}
		}
	}
	if err := sandbox.ValidateOperations(decl); err != nil {
		return nil, fmt.Errorf("%w: %w", errdefs.Invalid(path, "declaration breaks the provider contract"), err)
	}
	return decl, nil
}
