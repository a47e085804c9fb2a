package errdefs

import "errors"

// The error classes. Their meanings are the guide's ("Operation outcomes and
// retries") and must not drift: an unclassified error is an unknown outcome,
// never permission to retry a mutation.
var (
	// ErrInvalid rejects input before any effect.
	ErrInvalid = errors.New("invalid argument")
	// ErrOwnership means a resource exists but is not owned by the exact
	// reference and installation; nothing was touched.
	ErrOwnership = errors.New("ownership mismatch")
	// ErrExists means the resource already exists; nothing was reused or
	// overwritten.
	ErrExists = errors.New("already exists")
	// ErrNotFound is only a missing observation, never proof of absence.
	ErrNotFound = errors.New("not found")
	// ErrComputeUnconfirmed is an unknown outcome of a compute mutation: it
	// may or may not have taken effect.
	ErrComputeUnconfirmed = errors.New("compute outcome unconfirmed")
	// ErrCommandUnconfirmed means a command's completion cannot be proved;
	// partial output is not success and the command is never replayed.
	ErrCommandUnconfirmed = errors.New("command completion unconfirmed")
	// ErrUnsupported is the class of a declared-unsupported operation; the
	// concrete error is providercontract.UnsupportedError.
	ErrUnsupported = errors.New("unsupported operation")
	// ErrObservationUnavailable means an observation could not be made now.
	ErrObservationUnavailable = errors.New("observation unavailable")
	// ErrRuntimeNotRunning means the compute exists but its Runtime process
	// does not run, so the request cannot be served.
	ErrRuntimeNotRunning = errors.New("runtime not running")
	// ErrProtocolMismatch rejects a peer whose protocol version differs.
	ErrProtocolMismatch = errors.New("protocol mismatch")
	// ErrFenced rejects a caller whose owner epoch, connection or generation
	// has been superseded.
	ErrFenced = errors.New("fenced")
	// ErrFailedPrecondition refuses an operation that the resource's current
	// state does not allow (removing an enabled node, revoking a used
	// enrollment token); nothing was touched. The same request may succeed
	// once the state changes, so it is settled, not an unknown outcome.
	ErrFailedPrecondition = errors.New("failed precondition")
	// ErrContract is a provider or registration that breaks the provider
	// contract (incomplete declaration, malformed registration).
	ErrContract = errors.New("provider contract violation")
)

// IsInvalid reports whether err is of class ErrInvalid.
func IsInvalid(err error) bool { return errors.Is(err, ErrInvalid) }

// IsOwnership reports whether err is of class ErrOwnership.
func IsOwnership(err error) bool { return errors.Is(err, ErrOwnership) }

// IsExists reports whether err is of class ErrExists.
func IsExists(err error) bool { return errors.Is(err, ErrExists) }

// IsNotFound reports whether err is of class ErrNotFound.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsComputeUnconfirmed reports whether err is of class ErrComputeUnconfirmed.
func IsComputeUnconfirmed(err error) bool { return errors.Is(err, ErrComputeUnconfirmed) }

// IsCommandUnconfirmed reports whether err is of class ErrCommandUnconfirmed.
func IsCommandUnconfirmed(err error) bool { return errors.Is(err, ErrCommandUnconfirmed) }

// IsUnsupported reports whether err is of class ErrUnsupported.
func IsUnsupported(err error) bool { return errors.Is(err, ErrUnsupported) }

// IsObservationUnavailable reports whether err is of class
// ErrObservationUnavailable.
func IsObservationUnavailable(err error) bool { return errors.Is(err, ErrObservationUnavailable) }

// IsRuntimeNotRunning reports whether err is of class ErrRuntimeNotRunning.
func IsRuntimeNotRunning(err error) bool { return errors.Is(err, ErrRuntimeNotRunning) }

// IsProtocolMismatch reports whether err is of class ErrProtocolMismatch.
func IsProtocolMismatch(err error) bool { return errors.Is(err, ErrProtocolMismatch) }

// IsFenced reports whether err is of class ErrFenced.
func IsFenced(err error) bool { return errors.Is(err, ErrFenced) }

// IsFailedPrecondition reports whether err is of class ErrFailedPrecondition.
func IsFailedPrecondition(err error) bool { return errors.Is(err, ErrFailedPrecondition) }

// IsContract reports whether err is of class ErrContract.
func IsContract(err error) bool { return errors.Is(err, ErrContract) }

// FieldError is an ErrInvalid that names the offending input field, so a gRPC
// boundary can answer InvalidArgument with a field violation. Field is a
// path authored in code (for example "reference.tenant_id"); Reason is a
// fixed phrase authored in code. Neither ever holds submitted values.
type FieldError struct {
	Field  string
	Reason string
}

// Invalid returns an ErrInvalid naming field and a fixed reason.
func Invalid(field, reason string) error { return &FieldError{Field: field, Reason: reason} }

func (e *FieldError) Error() string { return "invalid " + e.Field + ": " + e.Reason }

// Is makes every FieldError an ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// AsField returns the first FieldError in err's chain.
func AsField(err error) (*FieldError, bool) {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe, true
	}
	return nil, false
}

// Field returns the field named by the first FieldError in err's chain.
func Field(err error) (string, bool) {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Field, true
	}
	return "", false
}

// Refusal is a settled refusal that tells the operator what to do: an error
// of class Class (usually ErrFailedPrecondition) with a fixed, specific
// Reason code ("node_enabled") and a Message ("node is enabled: retire it
// first"). Both are authored constants, never built from submitted values,
// native text or resource identities, so a server boundary may send them
// as they are in place of its class's generic reason and message.
type Refusal struct {
	// Class is the errdefs class the refusal belongs to.
	Class error
	// Reason is a short snake_case code naming the refusal.
	Reason string
	// Message says what holds and what to do about it.
	Message string
}

// Refuse returns a Refusal of class with the fixed reason and message.
func Refuse(class error, reason, message string) *Refusal {
	return &Refusal{Class: class, Reason: reason, Message: message}
}

func (r *Refusal) Error() string { return r.Message }

// Unwrap returns the refusal's class, so errors.Is sees it.
func (r *Refusal) Unwrap() error { return r.Class }

// AsRefusal returns the first Refusal in err's chain.
func AsRefusal(err error) (*Refusal, bool) {
	var r *Refusal
	if errors.As(err, &r) {
		return r, true
	}
	return nil, false
}
