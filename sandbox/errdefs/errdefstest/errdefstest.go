package errdefstest

import (
	"errors"
	"testing"

	"berth.dev/sandbox/errdefs"
)

// Must fails the test on err.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// WantClass fails the test unless err is of class class.
func WantClass(t testing.TB, err, class error) {
	t.Helper()
	if !errors.Is(err, class) {
		t.Fatalf("error %v, want class %v", err, class)
	}
}

// WantField fails the test unless err is errdefs.ErrInvalid naming field.
func WantField(t testing.TB, err error, field string) {
	t.Helper()
	got, ok := errdefs.Field(err)
	if !errdefs.IsInvalid(err) || !ok || got != field {
		t.Fatalf("error %v, want invalid %s", err, field)
	}
}

// WantRefusal fails the test unless err is a refusal (errdefs.Refuse) of
// class class with the fixed reason reason.
func WantRefusal(t testing.TB, err, class error, reason string) {
	t.Helper()
	var r *errdefs.Refusal
	if !errors.As(err, &r) || !errors.Is(err, class) || r.Reason != reason {
		t.Fatalf("error %v, want a %v refusal %s", err, class, reason)
	}
}
