package nodewire

import (
	"errors"
	"math"
	"regexp"
	"strings"

	"berth.dev/sandbox/errdefs"
)

// The fixed reasons of the field errors this package authors.
const (
	reasonRequired    = "required"
	reasonUnknownEnum = "unknown value"
	reasonRange       = "out of bounds"
)

func required(path string) error { return errdefs.Invalid(path, reasonRequired) }

// sub joins a field path and a field name.
func sub(path, name string) string { return path + "." + name }

// rebase re-roots a FieldError authored by a sandbox validator (whose paths
// start with from) at path. Other errors are returned unchanged.
func rebase(err error, from, path string) error {
	var fe *errdefs.FieldError
	if err == nil || from == path || !errors.As(err, &fe) {
		return err
	}
	if fe.Field == from {
		return errdefs.Invalid(path, fe.Reason)
	}
	if rest, ok := strings.CutPrefix(fe.Field, from+"."); ok {
		return errdefs.Invalid(sub(path, rest), fe.Reason)
	}
	return err
}

// fieldPattern is the form of every field path this package sends or
// accepts in ErrorInfo metadata: dotted lowercase snake_case names.
var fieldPattern = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)

const maxFieldLen = 128

func safeField(f string) bool { return len(f) <= maxFieldLen && fieldPattern.MatchString(f) }

// contractError is a provider result that breaks the contract or that the
// wire cannot represent. It names only an authored field path.
type contractError struct{ field string }

func (e *contractError) Error() string {
	return "node wire: result field " + e.field + " breaks the provider contract"
}

// Is makes every contractError an errdefs.ErrContract.
func (e *contractError) Is(target error) bool { return target == errdefs.ErrContract }

func badResult(field string) error { return &contractError{field: field} }

// asResult turns a validation failure of a result into a contractError
// naming the same field.
func asResult(err error, fallback string) error {
	if err == nil {
		return nil
	}
	if f, ok := errdefs.Field(err); ok {
		return badResult(f)
	}
	return badResult(fallback)
}

// fitsInt32 reports whether v is representable as an int32.
func fitsInt32(v int) bool { return v >= math.MinInt32 && v <= math.MaxInt32 }
