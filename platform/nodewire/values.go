package nodewire

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// Field path roots of the top-level messages.
const (
	pathRequest  = "request"
	pathResponse = "response"
)

// ReferenceToWire converts r; the zero Reference becomes nil (unset).
func ReferenceToWire(r sandbox.Reference) *pb.Reference {
	if r.IsZero() {
		return nil
	}
	return &pb.Reference{TenantId: r.TenantID, EnvironmentId: r.EnvironmentID, AllocationId: r.AllocationID}
}

// ReferenceFromWire converts and validates a Reference (paths
// "reference.*"). It is required.
func ReferenceFromWire(m *pb.Reference) (sandbox.Reference, error) {
	return referenceFromWire("reference", m)
}

func referenceFromWire(path string, m *pb.Reference) (sandbox.Reference, error) {
	if m == nil {
		return sandbox.Reference{}, required(path)
	}
	r := sandbox.Reference{TenantID: m.GetTenantId(), EnvironmentID: m.GetEnvironmentId(), AllocationID: m.GetAllocationId()}
	if err := r.Validate(); err != nil {
		return sandbox.Reference{}, rebase(err, "reference", path)
	}
	return r, nil
}

var stateToWire = map[sandbox.State]pb.State{
	"":                   pb.State_STATE_UNSPECIFIED,
	sandbox.StateAbsent:  pb.State_STATE_ABSENT,
	sandbox.StateCreated: pb.State_STATE_CREATED,
	sandbox.StateRunning: pb.State_STATE_RUNNING,
	sandbox.StatePaused:  pb.State_STATE_PAUSED,
	sandbox.StateStopped: pb.State_STATE_STOPPED,
}

var stateFromWire = invert(stateToWire)

func invert[K, V comparable](m map[K]V) map[V]K {
	out := make(map[V]K, len(m))
	for k, v := range m {
		out[v] = k
	}
	return out
}

// InfoToWire converts a provider's Info. The zero Info (nothing observed)
// becomes an empty message. An Info that contradicts itself (see
// sandbox.Info.CheckFor), carries an invalid Reference, an unknown state or
// a lease expiry outside the Timestamp range fails with ErrContract.
func InfoToWire(i sandbox.Info) (*pb.Info, error) {
	if err := checkInfo("info", i); err != nil {
		return nil, asResult(err, "info")
	}
	m := &pb.Info{
		Reference:         ReferenceToWire(i.Reference),
		ProviderId:        i.ProviderID,
		State:             stateToWire[i.State],
		BootstrapComplete: i.BootstrapComplete,
		CreateSettled:     i.CreateSettled,
	}
	if !i.LeaseExpiry.IsZero() {
		m.LeaseExpiry = timestamppb.New(i.LeaseExpiry)
		if m.LeaseExpiry.CheckValid() != nil {
			return nil, badResult("info.lease_expiry")
		}
	}
	return m, nil
}

// InfoFromWire converts and validates an Info (paths "info.*"). The message
// is required; an empty message is the zero Info. A non-zero Info needs a
// valid Reference and must not contradict itself; the caller still checks
// it against the requested Reference with sandbox.Info.CheckFor.
func InfoFromWire(m *pb.Info) (sandbox.Info, error) { return infoFromWire("info", m) }

func infoFromWire(path string, m *pb.Info) (sandbox.Info, error) {
	if m == nil {
		return sandbox.Info{}, required(path)
	}
	state, ok := stateFromWire[m.GetState()]
	if !ok {
		return sandbox.Info{}, errdefs.Invalid(sub(path, "state"), reasonUnknownEnum)
	}
	i := sandbox.Info{
		ProviderID:        m.GetProviderId(),
		State:             state,
		BootstrapComplete: m.GetBootstrapComplete(),
		CreateSettled:     m.GetCreateSettled(),
	}
	if m.Reference != nil {
		ref, err := referenceFromWire(sub(path, "reference"), m.GetReference())
		if err != nil {
			return sandbox.Info{}, err
		}
		i.Reference = ref
	}
	if ts := m.GetLeaseExpiry(); ts != nil {
		if ts.CheckValid() != nil {
			return sandbox.Info{}, errdefs.Invalid(sub(path, "lease_expiry"), "not a valid timestamp")
		}
		// AsTime is UTC; the zero instant stays "no lease".
		i.LeaseExpiry = ts.AsTime()
		if i.LeaseExpiry.Equal(time.Time{}) {
			i.LeaseExpiry = time.Time{}
		}
	}
	if err := checkInfo(path, i); err != nil {
		return sandbox.Info{}, err
	}
	return i, nil
}

// checkInfo is what both directions require of an Info.
func checkInfo(path string, i sandbox.Info) error {
	if i == (sandbox.Info{}) {
		return nil
	}
	if i.Reference.IsZero() {
		return required(sub(path, "reference"))
	}
	if err := i.Reference.Validate(); err != nil {
		return rebase(err, "reference", sub(path, "reference"))
	}
	if _, ok := stateToWire[i.State]; !ok {
		return errdefs.Invalid(sub(path, "state"), reasonUnknownEnum)
	}
	return rebase(i.CheckFor(i.Reference), "info", path)
}

// ResourcesToWire converts r.
func ResourcesToWire(r sandbox.Resources) *pb.Resources {
	return &pb.Resources{CpuMillis: r.CPUMillis, MemoryBytes: r.MemoryBytes, DiskBytes: r.DiskBytes}
}

// ResourcesFromWire converts Resources and checks the shared bounds (paths
// "resources.*"). It is required.
func ResourcesFromWire(m *pb.Resources) (sandbox.Resources, error) {
	return resourcesFromWire("resources", m)
}

func resourcesFromWire(path string, m *pb.Resources) (sandbox.Resources, error) {
	if m == nil {
		return sandbox.Resources{}, required(path)
	}
	r := sandbox.Resources{CPUMillis: m.GetCpuMillis(), MemoryBytes: m.GetMemoryBytes(), DiskBytes: m.GetDiskBytes()}
	if err := r.Validate(); err != nil {
		return sandbox.Resources{}, rebase(err, "resources", path)
	}
	return r, nil
}

// errBootstrap is the one error of an invalid bootstrap file: the file's own
// validation errors are not FieldErrors, so the field is the message.
func errBootstrap(path string) error { return errdefs.Invalid(path, "invalid runtime bootstrap file") }

// errCoreCA refuses a CA for the Runtime that is not PEM certificates.
var errCoreCA = errdefs.Invalid("core_ca_pem", "must be empty or PEM CA certificates")

// BootstrapToWire validates f and converts it, revealing the credential for
// the one message that must carry it. An invalid file fails with ErrInvalid
// ("bootstrap").
func BootstrapToWire(f runtimebootstrap.File) (*pb.Bootstrap, error) {
	if f.Validate() != nil || !fitsInt32(f.Version) {
		return nil, errBootstrap("bootstrap")
	}
	return &pb.Bootstrap{
		Version:    int32(f.Version),
		CoreUrl:    f.CoreURL,
		DeviceId:   f.DeviceID,
		Credential: f.Credential.Reveal(),
	}, nil
}

// BootstrapFromWire converts and validates a Bootstrap ("bootstrap"). The
// credential becomes a runtimebootstrap.Secret at once.
func BootstrapFromWire(m *pb.Bootstrap) (runtimebootstrap.File, error) {
	return bootstrapFromWire("bootstrap", m)
}

func bootstrapFromWire(path string, m *pb.Bootstrap) (runtimebootstrap.File, error) {
	if m == nil {
		return runtimebootstrap.File{}, required(path)
	}
	f := runtimebootstrap.File{
		Version:    int(m.GetVersion()),
		CoreURL:    m.GetCoreUrl(),
		DeviceID:   m.GetDeviceId(),
		Credential: runtimebootstrap.NewSecret(m.GetCredential()),
	}
	if f.Validate() != nil {
		return runtimebootstrap.File{}, errBootstrap(path)
	}
	return f, nil
}

// CreateRequestToWire converts req. It does not validate: a Create is
// validated once per boundary, by its caller before dispatch (Core's
// lifecycle worker, before its claim) and by CreateRequestFromWire on the
// node's side. A failure (a value the wire cannot carry) is of class
// ErrInvalid.
func CreateRequestToWire(req sandbox.CreateRequest) (*pb.CreateRequest, error) {
	b, err := BootstrapToWire(req.Bootstrap)
	if err != nil {
		return nil, err
	}
	return &pb.CreateRequest{
		Reference: ReferenceToWire(req.Reference),
		Resources: ResourcesToWire(req.Resources),
		Bootstrap: b,
		CoreCaPem: req.CoreCA,
	}, nil
}

// CreateRequestFromWire converts and validates a CreateRequest (paths
// "reference.*", "resources.*", "bootstrap", "core_ca_pem"): each part is
// validated once as it is decoded, which together is exactly
// sandbox.CreateRequest.Validate.
func CreateRequestFromWire(m *pb.CreateRequest) (sandbox.CreateRequest, error) {
	if m == nil {
		return sandbox.CreateRequest{}, required(pathRequest)
	}
	ref, err := referenceFromWire("reference", m.GetReference())
	if err != nil {
		return sandbox.CreateRequest{}, err
	}
	res, err := resourcesFromWire("resources", m.GetResources())
	if err != nil {
		return sandbox.CreateRequest{}, err
	}
	boot, err := bootstrapFromWire("bootstrap", m.GetBootstrap())
	if err != nil {
		return sandbox.CreateRequest{}, err
	}
	if runtimebootstrap.ValidateCA(m.GetCoreCaPem()) != nil {
		return sandbox.CreateRequest{}, errCoreCA
	}
	return sandbox.CreateRequest{Reference: ref, Resources: res, Bootstrap: boot, CoreCA: m.GetCoreCaPem()}, nil
}
