package providercontract

import (
	"maps"
	"regexp"
	"slices"
)

// Operation names one method of a provider contract interface, exactly as
// the method is spelled (for example "Create", "ObserveBatch").
type Operation string

// State is a declaration entry's decision. The zero value is no decision and
// never validates.
type State uint8

const (
	// StateUnset is the zero value: no decision was made.
	StateUnset State = iota
	// StateSupported declares that the provider implements the operation.
	StateSupported
	// StateUnsupported declares that the operation returns UnsupportedError
	// before any native I/O.
	StateUnsupported
)

func (s State) String() string {
	switch s {
	case StateUnset:
		return "unset"
	case StateSupported:
		return "supported"
	case StateUnsupported:
		return "unsupported"
	}
	return "unknown"
}

// ReasonCode is an authored, safe reason for an unsupported decision: a
// lowercase snake_case identifier such as "no_native_checkpoint".
type ReasonCode string

var reasonPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{1,62}[a-z0-9]$`)

// Valid reports whether c has the safe reason-code form.
func (c ReasonCode) Valid() bool { return reasonPattern.MatchString(string(c)) }

// Decision is one declaration entry: supported with no reason, or
// unsupported with an authored reason code.
type Decision struct {
	State  State
	Reason ReasonCode
}

// Supported returns the supported decision.
func Supported() Decision { return Decision{State: StateSupported} }

// Unsupported returns the unsupported decision with reason.
func Unsupported(reason ReasonCode) Decision {
	return Decision{State: StateUnsupported, Reason: reason}
}

// Operations is a provider's complete declaration: one decision for every
// method of every contract interface.
type Operations map[Operation]Decision

// Clone returns a copy that the caller may change.
func (o Operations) Clone() Operations { return maps.Clone(o) }

// Equal reports whether o and other declare the same decisions.
func (o Operations) Equal(other Operations) bool { return maps.Equal(o, other) }

// Supports reports whether op is declared supported. Callers decide support
// from the declaration, never by type assertion.
func (o Operations) Supports(op Operation) bool { return o[op].State == StateSupported }

// Sorted returns the declared operations in name order.
func (o Operations) Sorted() []Operation { return slices.Sorted(maps.Keys(o)) }

// Check is the first statement of every provider method: it returns nil for
// a supported operation, the typed UnsupportedError for an unsupported one,
// and a ContractError when the declaration does not decide op. It performs
// no I/O, so an unsupported method never reaches native code.
func (o Operations) Check(op Operation) error {
	d, ok := o[op]
	switch {
	case !ok:
		return &ContractError{Code: CodeOperationUndeclared}
	case d.State == StateSupported && d.Reason == "":
		return nil
	case d.State == StateUnsupported && d.Reason.Valid():
		return &UnsupportedError{Operation: op, Code: d.Reason}
	}
	return &ContractError{Code: CodeDecisionInvalid}
}
