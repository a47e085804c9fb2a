package nodewire

import (
	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// ComputeToWire converts c; the zero Compute becomes nil (unset).
func ComputeToWire(c sandbox.Compute) *pb.Compute {
	if c == (sandbox.Compute{}) {
		return nil
	}
	return &pb.Compute{Reference: ReferenceToWire(c.Reference), Generation: c.Generation, Name: c.Name, Id: c.ID}
}

// ComputeFromWire converts and validates a Compute (paths "compute.*"). It
// is required and needs a valid Reference; the name and native id are the
// provider's and pass unchanged.
func ComputeFromWire(m *pb.Compute) (sandbox.Compute, error) { return computeFromWire("compute", m) }

func computeFromWire(path string, m *pb.Compute) (sandbox.Compute, error) {
	if m == nil {
		return sandbox.Compute{}, required(path)
	}
	ref, err := referenceFromWire(sub(path, "reference"), m.GetReference())
	if err != nil {
		return sandbox.Compute{}, err
	}
	return sandbox.Compute{Reference: ref, Generation: m.GetGeneration(), Name: m.GetName(), ID: m.GetId()}, nil
}

var computeStateToWire = map[sandbox.ComputeState]pb.ComputeState{
	sandbox.ComputeAbsent:  pb.ComputeState_COMPUTE_STATE_ABSENT,
	sandbox.ComputeRunning: pb.ComputeState_COMPUTE_STATE_RUNNING,
	sandbox.ComputePaused:  pb.ComputeState_COMPUTE_STATE_PAUSED,
	sandbox.ComputeStopped: pb.ComputeState_COMPUTE_STATE_STOPPED,
}

var computeStateFromWire = invert(computeStateToWire)

// ComputeInfoToWire converts an incarnation's observation. An invalid
// Compute or a missing or unknown state fails with ErrContract.
func ComputeInfoToWire(ci sandbox.ComputeInfo) (*pb.ComputeInfo, error) {
	return computeInfoToWire("info", ci)
}

func computeInfoToWire(path string, ci sandbox.ComputeInfo) (*pb.ComputeInfo, error) {
	if err := checkComputeInfo(path, ci); err != nil {
		return nil, asResult(err, path)
	}
	return &pb.ComputeInfo{Compute: ComputeToWire(ci.Compute), State: computeStateToWire[ci.State], AbsenceReceipt: ci.AbsenceReceipt}, nil
}

// ComputeInfoFromWire converts and validates a ComputeInfo (paths
// "info.*"). The compute and a specified state are required.
func ComputeInfoFromWire(m *pb.ComputeInfo) (sandbox.ComputeInfo, error) {
	return computeInfoFromWire("info", m)
}

func computeInfoFromWire(path string, m *pb.ComputeInfo) (sandbox.ComputeInfo, error) {
	if m == nil {
		return sandbox.ComputeInfo{}, required(path)
	}
	c, err := computeFromWire(sub(path, "compute"), m.GetCompute())
	if err != nil {
		return sandbox.ComputeInfo{}, err
	}
	if m.GetState() == pb.ComputeState_COMPUTE_STATE_UNSPECIFIED {
		return sandbox.ComputeInfo{}, required(sub(path, "state"))
	}
	state, ok := computeStateFromWire[m.GetState()]
	if !ok {
		return sandbox.ComputeInfo{}, errdefs.Invalid(sub(path, "state"), reasonUnknownEnum)
	}
	ci := sandbox.ComputeInfo{Compute: c, State: state, AbsenceReceipt: m.GetAbsenceReceipt()}
	if err := checkReceipt(path, ci); err != nil {
		return sandbox.ComputeInfo{}, err
	}
	return ci, nil
}

// checkReceipt refuses an absence receipt that observes an instance: a
// receipt is State absent without a native id.
func checkReceipt(path string, ci sandbox.ComputeInfo) error {
	if ci.AbsenceReceipt && (ci.State != sandbox.ComputeAbsent || ci.Compute.ID != "") {
		return errdefs.Invalid(sub(path, "absence_receipt"), "must observe no instance")
	}
	return nil
}

func checkComputeInfo(path string, ci sandbox.ComputeInfo) error {
	if ci.Compute.Reference.IsZero() {
		return required(sub(path, "compute.reference"))
	}
	if err := ci.Compute.Reference.Validate(); err != nil {
		return rebase(err, "reference", sub(path, "compute.reference"))
	}
	if ci.State == "" {
		return required(sub(path, "state"))
	}
	if _, ok := computeStateToWire[ci.State]; !ok {
		return errdefs.Invalid(sub(path, "state"), reasonUnknownEnum)
	}
	return checkReceipt(path, ci)
}

// SnapshotToWire converts s.
func SnapshotToWire(s sandbox.SnapshotIdentity) *pb.SnapshotIdentity {
	return &pb.SnapshotIdentity{Id: s.ID, Provenance: s.Provenance}
}

// SnapshotFromWire converts and validates a SnapshotIdentity (paths
// "snapshot.*"). It and its id are required; the provenance passes
// unchanged.
func SnapshotFromWire(m *pb.SnapshotIdentity) (sandbox.SnapshotIdentity, error) {
	return snapshotFromWire("snapshot", m)
}

func snapshotFromWire(path string, m *pb.SnapshotIdentity) (sandbox.SnapshotIdentity, error) {
	if m == nil {
		return sandbox.SnapshotIdentity{}, required(path)
	}
	if m.GetId() == "" {
		return sandbox.SnapshotIdentity{}, required(sub(path, "id"))
	}
	return sandbox.SnapshotIdentity{ID: m.GetId(), Provenance: m.GetProvenance()}, nil
}

// NewComputeRequestToWire converts NewCompute's argument.
func NewComputeRequestToWire(previous sandbox.Compute) *pb.NewComputeRequest {
	return &pb.NewComputeRequest{Previous: ComputeToWire(previous)}
}

// NewComputeRequestFromWire converts and validates NewCompute's argument
// (paths "previous.*").
func NewComputeRequestFromWire(m *pb.NewComputeRequest) (sandbox.Compute, error) {
	if m == nil {
		return sandbox.Compute{}, required(pathRequest)
	}
	return computeFromWire("previous", m.GetPrevious())
}

// SuspendRequestToWire converts req.
func SuspendRequestToWire(req sandbox.SuspendRequest) *pb.SuspendRequest {
	return &pb.SuspendRequest{
		Compute:     ComputeToWire(req.Compute),
		OperationId: req.OperationID,
		ObserveOnly: req.ObserveOnly,
	}
}

// SuspendRequestFromWire converts and validates a SuspendRequest (paths
// "compute.*", "operation_id"). The operation id is required.
func SuspendRequestFromWire(m *pb.SuspendRequest) (sandbox.SuspendRequest, error) {
	if m == nil {
		return sandbox.SuspendRequest{}, required(pathRequest)
	}
	c, err := computeFromWire("compute", m.GetCompute())
	if err != nil {
		return sandbox.SuspendRequest{}, err
	}
	if m.GetOperationId() == "" {
		return sandbox.SuspendRequest{}, required("operation_id")
	}
	return sandbox.SuspendRequest{Compute: c, OperationID: m.GetOperationId(), ObserveOnly: m.GetObserveOnly()}, nil
}

// SuspendResultToWire converts a capture's outcome into the
// SuspendResponse. A snapshot without id or an invalid source fails with
// ErrContract.
func SuspendResultToWire(r sandbox.SuspendResult) (*pb.SuspendResponse, error) {
	if r.Snapshot.ID == "" {
		return nil, badResult("snapshot.id")
	}
	src, err := computeInfoToWire("source", r.Source)
	if err != nil {
		return nil, err
	}
	return &pb.SuspendResponse{Snapshot: SnapshotToWire(r.Snapshot), Source: src}, nil
}

// SuspendResultFromWire converts and validates a SuspendResponse (paths
// "snapshot.*", "source.*"). Both are required.
func SuspendResultFromWire(m *pb.SuspendResponse) (sandbox.SuspendResult, error) {
	if m == nil {
		return sandbox.SuspendResult{}, required(pathResponse)
	}
	s, err := snapshotFromWire("snapshot", m.GetSnapshot())
	if err != nil {
		return sandbox.SuspendResult{}, err
	}
	src, err := computeInfoFromWire("source", m.GetSource())
	if err != nil {
		return sandbox.SuspendResult{}, err
	}
	return sandbox.SuspendResult{Snapshot: s, Source: src}, nil
}

// CaptureRequestToWire converts req.
func CaptureRequestToWire(req sandbox.CaptureRequest) *pb.CaptureRequest {
	return &pb.CaptureRequest{
		Compute:     ComputeToWire(req.Compute),
		OperationId: req.OperationID,
		ObserveOnly: req.ObserveOnly,
	}
}

// CaptureRequestFromWire converts and validates a CaptureRequest (paths
// "compute.*", "operation_id"). The operation id is required.
func CaptureRequestFromWire(m *pb.CaptureRequest) (sandbox.CaptureRequest, error) {
	if m == nil {
		return sandbox.CaptureRequest{}, required(pathRequest)
	}
	c, err := computeFromWire("compute", m.GetCompute())
	if err != nil {
		return sandbox.CaptureRequest{}, err
	}
	if m.GetOperationId() == "" {
		return sandbox.CaptureRequest{}, required("operation_id")
	}
	return sandbox.CaptureRequest{Compute: c, OperationID: m.GetOperationId(), ObserveOnly: m.GetObserveOnly()}, nil
}

// CaptureResultToWire converts a Capture's outcome into the
// CaptureResponse. A snapshot without id or an invalid source fails with
// ErrContract.
func CaptureResultToWire(r sandbox.CaptureResult) (*pb.CaptureResponse, error) {
	if r.Snapshot.ID == "" {
		return nil, badResult("snapshot.id")
	}
	src, err := computeInfoToWire("source", r.Source)
	if err != nil {
		return nil, err
	}
	return &pb.CaptureResponse{Snapshot: SnapshotToWire(r.Snapshot), Source: src}, nil
}

// CaptureResultFromWire converts and validates a CaptureResponse (paths
// "snapshot.*", "source.*"). Both are required.
func CaptureResultFromWire(m *pb.CaptureResponse) (sandbox.CaptureResult, error) {
	if m == nil {
		return sandbox.CaptureResult{}, required(pathResponse)
	}
	s, err := snapshotFromWire("snapshot", m.GetSnapshot())
	if err != nil {
		return sandbox.CaptureResult{}, err
	}
	src, err := computeInfoFromWire("source", m.GetSource())
	if err != nil {
		return sandbox.CaptureResult{}, err
	}
	return sandbox.CaptureResult{Snapshot: s, Source: src}, nil
}

// ResumeRequestToWire converts req.
func ResumeRequestToWire(req sandbox.ResumeRequest) (*pb.ResumeRequest, error) {
	m := &pb.ResumeRequest{
		Snapshot:    SnapshotToWire(req.Snapshot),
		Target:      ComputeToWire(req.Target),
		OperationId: req.OperationID,
		ObserveOnly: req.ObserveOnly,
	}
	if req.ObserveOnly {
		return m, nil
	}
	if err := req.Resources.Validate(); err != nil {
		return nil, err
	}
	b, err := BootstrapToWire(req.Bootstrap)
	if err != nil {
		return nil, err
	}
	if runtimebootstrap.ValidateCA(req.CoreCA) != nil {
		return nil, errCoreCA
	}
	m.Resources, m.Bootstrap, m.CoreCaPem = ResourcesToWire(req.Resources), b, req.CoreCA
	return m, nil
}

// ResumeRequestFromWire converts and validates a ResumeRequest (paths
// "snapshot.*", "target.*", "operation_id", and but with observe_only
// "resources.*", "bootstrap" and the optional "core_ca_pem"). All others
// are required.
func ResumeRequestFromWire(m *pb.ResumeRequest) (sandbox.ResumeRequest, error) {
	if m == nil {
		return sandbox.ResumeRequest{}, required(pathRequest)
	}
	s, err := snapshotFromWire("snapshot", m.GetSnapshot())
	if err != nil {
		return sandbox.ResumeRequest{}, err
	}
	target, err := computeFromWire("target", m.GetTarget())
	if err != nil {
		return sandbox.ResumeRequest{}, err
	}
	if m.GetOperationId() == "" {
		return sandbox.ResumeRequest{}, required("operation_id")
	}
	req := sandbox.ResumeRequest{
		Snapshot: s, Target: target, OperationID: m.GetOperationId(), ObserveOnly: m.GetObserveOnly(),
	}
	if req.ObserveOnly {
		return req, nil
	}
	if req.Resources, err = resourcesFromWire("resources", m.GetResources()); err != nil {
		return sandbox.ResumeRequest{}, err
	}
	if req.Bootstrap, err = bootstrapFromWire("bootstrap", m.GetBootstrap()); err != nil {
		return sandbox.ResumeRequest{}, err
	}
	if runtimebootstrap.ValidateCA(m.GetCoreCaPem()) != nil {
		return sandbox.ResumeRequest{}, errCoreCA
	}
	req.CoreCA = m.GetCoreCaPem()
	return req, nil
}

// ResumeResultToWire converts a restore's outcome into the ResumeResponse.
// An invalid ComputeInfo fails with ErrContract.
func ResumeResultToWire(r sandbox.ResumeResult) (*pb.ResumeResponse, error) {
	ci, err := computeInfoToWire("compute", r.Compute)
	if err != nil {
		return nil, err
	}
	return &pb.ResumeResponse{Compute: ci}, nil
}

// ResumeResultFromWire converts and validates a ResumeResponse (paths
// "compute.*"). The restored incarnation is required.
func ResumeResultFromWire(m *pb.ResumeResponse) (sandbox.ResumeResult, error) {
	if m == nil {
		return sandbox.ResumeResult{}, required(pathResponse)
	}
	ci, err := computeInfoFromWire("compute", m.GetCompute())
	if err != nil {
		return sandbox.ResumeResult{}, err
	}
	return sandbox.ResumeResult{Compute: ci}, nil
}

// SeededCreateRequestToWire converts req; like CreateRequestToWire it does
// not validate.
func SeededCreateRequestToWire(req sandbox.SeededCreateRequest) (*pb.CreateSeededRequest, error) {
	create, err := CreateRequestToWire(req.Create)
	if err != nil {
		return nil, err
	}
	return &pb.CreateSeededRequest{Create: create, Owner: ReferenceToWire(req.Owner), Snapshot: SnapshotToWire(req.Snapshot)}, nil
}

// SeededCreateRequestFromWire converts and validates a CreateSeededRequest
// (paths "create.*", "owner.*", "snapshot.*"): the Create as
// CreateRequestFromWire, then sandbox.SeededCreateRequest.Validate.
func SeededCreateRequestFromWire(m *pb.CreateSeededRequest) (sandbox.SeededCreateRequest, error) {
	if m == nil {
		return sandbox.SeededCreateRequest{}, required(pathRequest)
	}
	if m.GetCreate() == nil {
		return sandbox.SeededCreateRequest{}, required("create")
	}
	create, err := CreateRequestFromWire(m.GetCreate())
	if err != nil {
		return sandbox.SeededCreateRequest{}, err
	}
	owner, err := referenceFromWire("owner", m.GetOwner())
	if err != nil {
		return sandbox.SeededCreateRequest{}, err
	}
	snap, err := snapshotFromWire("snapshot", m.GetSnapshot())
	if err != nil {
		return sandbox.SeededCreateRequest{}, err
	}
	req := sandbox.SeededCreateRequest{Create: create, Owner: owner, Snapshot: snap}
	if err := req.Validate(); err != nil {
		return sandbox.SeededCreateRequest{}, err
	}
	return req, nil
}

// ExportRequestToWire converts an export's owner and snapshot.
func ExportRequestToWire(owner sandbox.Reference, s sandbox.SnapshotIdentity) *pb.ExportSnapshotRequest {
	return &pb.ExportSnapshotRequest{Owner: ReferenceToWire(owner), Snapshot: SnapshotToWire(s)}
}

// ExportRequestFromWire converts and validates an ExportSnapshotRequest
// (paths "owner.*", "snapshot.*").
func ExportRequestFromWire(m *pb.ExportSnapshotRequest) (sandbox.Reference, sandbox.SnapshotIdentity, error) {
	if m == nil {
		return sandbox.Reference{}, sandbox.SnapshotIdentity{}, required(pathRequest)
	}
	owner, err := referenceFromWire("owner", m.GetOwner())
	if err != nil {
		return sandbox.Reference{}, sandbox.SnapshotIdentity{}, err
	}
	s, err := snapshotFromWire("snapshot", m.GetSnapshot())
	if err != nil {
		return sandbox.Reference{}, sandbox.SnapshotIdentity{}, err
	}
	return owner, s, nil
}

// ImportHeaderToWire converts an import's request into its stream's
// first message.
func ImportHeaderToWire(req sandbox.ImportRequest) *pb.ImportSnapshotRequest {
	return &pb.ImportSnapshotRequest{Message: &pb.ImportSnapshotRequest_Header{Header: &pb.ImportHeader{
		Owner: ReferenceToWire(req.Owner), OperationId: req.OperationID, Discard: req.Discard}}}
}

// ImportHeaderFromWire converts and validates an import stream's first
// message (paths "header.*"): it must be the header.
func ImportHeaderFromWire(m *pb.ImportSnapshotRequest) (sandbox.ImportRequest, error) {
	h := m.GetHeader()
	if h == nil {
		return sandbox.ImportRequest{}, required("header")
	}
	owner, err := referenceFromWire("header.owner", h.GetOwner())
	if err != nil {
		return sandbox.ImportRequest{}, err
	}
	if h.GetOperationId() == "" {
		return sandbox.ImportRequest{}, required("header.operation_id")
	}
	return sandbox.ImportRequest{Owner: owner, OperationID: h.GetOperationId(), Discard: h.GetDiscard()}, nil
}

// ImportResultToWire converts an import's snapshot (nil after a discard).
func ImportResultToWire(s sandbox.SnapshotIdentity) *pb.ImportSnapshotResponse {
	if s == (sandbox.SnapshotIdentity{}) {
		return &pb.ImportSnapshotResponse{}
	}
	return &pb.ImportSnapshotResponse{Snapshot: SnapshotToWire(s)}
}

// MaxSnapshotChunk bounds one data message of ExportSnapshot and
// ImportSnapshot.
const MaxSnapshotChunk = 1 << 20
