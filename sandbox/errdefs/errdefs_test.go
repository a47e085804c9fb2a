package errdefs_test

import (
	"errors"
	"fmt"
	"testing"

	"berth.dev/sandbox/errdefs"
)

func TestClassesAreDistinctAndSurviveWrapping(t *testing.T) {
	checks := []struct {
		err error
		is  func(error) bool
	}{
		{errdefs.ErrInvalid, errdefs.IsInvalid},
		{errdefs.ErrOwnership, errdefs.IsOwnership},
		{errdefs.ErrExists, errdefs.IsExists},
		{errdefs.ErrNotFound, errdefs.IsNotFound},
		{errdefs.ErrComputeUnconfirmed, errdefs.IsComputeUnconfirmed},
		{errdefs.ErrCommandUnconfirmed, errdefs.IsCommandUnconfirmed},
		{errdefs.ErrUnsupported, errdefs.IsUnsupported},
		{errdefs.ErrObservationUnavailable, errdefs.IsObservationUnavailable},
		{errdefs.ErrRuntimeNotRunning, errdefs.IsRuntimeNotRunning},
		{errdefs.ErrProtocolMismatch, errdefs.IsProtocolMismatch},
		{errdefs.ErrFenced, errdefs.IsFenced},
		{errdefs.ErrFailedPrecondition, errdefs.IsFailedPrecondition},
		{errdefs.ErrContract, errdefs.IsContract},
	}
	for i, c := range checks {
		wrapped := fmt.Errorf("create volume: %w", c.err)
		for j, other := range checks {
			if got, want := other.is(wrapped), i == j; got != want {
				t.Errorf("class %d checked by class %d's Is: got %v, want %v", i, j, got, want)
			}
		}
	}
}

func TestFieldErrorIsInvalidAndNamesField(t *testing.T) {
	err := fmt.Errorf("create session: %w", errdefs.Invalid("reference.tenant_id", "must be a canonical UUID"))
	if !errdefs.IsInvalid(err) {
		t.Fatalf("field error is not ErrInvalid: %v", err)
	}
	if errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("field error matched another class")
	}
	field, ok := errdefs.Field(err)
	if !ok || field != "reference.tenant_id" {
		t.Fatalf("Field = %q, %v", field, ok)
	}
	if _, ok := errdefs.Field(errdefs.ErrInvalid); ok {
		t.Fatalf("plain sentinel reported a field")
	}
}
