package pgerr_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"berth.dev/core/store/pgerr"
	"berth.dev/sandbox/errdefs"
)

func TestClassify(t *testing.T) {
	// secretish stands for a value the server may quote in its detail line;
	// no classified text may repeat it.
	const secretish = "Key (public_key_hash)=(\\xdeadbeef) already exists."
	server := func(code string) error {
		return &pgconn.PgError{Code: code, Message: "server says " + code, Detail: secretish,
			ConstraintName: "nodes_public_key_hash_key", TableName: "nodes", ColumnName: "state"}
	}
	dialErr := &net.OpError{Op: "dial", Net: "unix", Err: errors.New("connection refused")}
	tests := []struct {
		name  string
		err   error
		class error // nil: no class
		text  string
	}{
		{"unique", server("23505"), errdefs.ErrExists, "constraint nodes_public_key_hash_key violated"},
		{"exclusion", server("23P01"), errdefs.ErrExists, "violated"},
		{"foreign key", server("23503"), errdefs.ErrInvalid, "constraint nodes_public_key_hash_key violated"},
		{"check", server("23514"), errdefs.ErrInvalid, "violated"},
		{"restrict", server("23001"), errdefs.ErrInvalid, "violated"},
		{"not null", server("23502"), errdefs.ErrInvalid, "null value in nodes.state"},
		{"bad input syntax", server("22P02"), errdefs.ErrInvalid, "SQLSTATE 22P02"},
		{"numeric out of range", server("22003"), errdefs.ErrInvalid, "SQLSTATE 22003"},
		{"serialization", server("40001"), pgerr.ErrRetryable, "serialization failure"},
		{"deadlock", server("40P01"), pgerr.ErrRetryable, "deadlock"},
		{"lock not available", server("55P03"), pgerr.ErrRetryable, "lock not available"},
		{"connection failure", server("08006"), errdefs.ErrObservationUnavailable, "SQLSTATE 08006"},
		{"too many connections", server("53300"), errdefs.ErrObservationUnavailable, "unavailable"},
		{"auth failed", server("28P01"), errdefs.ErrObservationUnavailable, "unavailable"},
		{"admin shutdown", server("57P01"), errdefs.ErrObservationUnavailable, "unavailable"},
		{"cannot connect now", server("57P03"), errdefs.ErrObservationUnavailable, "unavailable"},
		{"statement timeout", server("57014"), errdefs.ErrObservationUnavailable, "unavailable"},
		{"read-only standby", server("25006"), errdefs.ErrObservationUnavailable, "unavailable"},
		{"no database", server("3D000"), errdefs.ErrObservationUnavailable, "unavailable"},
		{"unknown server error", server("42703"), nil, "SQLSTATE 42703): server says 42703"},
		{"no rows", fmt.Errorf("scan: %w", pgx.ErrNoRows), errdefs.ErrNotFound, "no such row"},
		{"dial", fmt.Errorf("connect: %w", dialErr), errdefs.ErrObservationUnavailable, "database unavailable"},
		{"deadline", fmt.Errorf("query: %w", context.DeadlineExceeded), errdefs.ErrObservationUnavailable, "unavailable"},
		{"canceled", context.Canceled, errdefs.ErrObservationUnavailable, "unavailable"},
		{"eof", io.ErrUnexpectedEOF, errdefs.ErrObservationUnavailable, "unavailable"},
		{"conn closed", pgconn.ErrConnClosed, errdefs.ErrObservationUnavailable, "unavailable"},
	}
	classes := []error{errdefs.ErrExists, errdefs.ErrInvalid, errdefs.ErrNotFound,
		errdefs.ErrObservationUnavailable, pgerr.ErrRetryable, errdefs.ErrFenced}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pgerr.Classify(tt.err)
			for _, c := range classes {
				if want := c == tt.class; errors.Is(got, c) != want { //nolint:errorlint // c and tt.class are entries of the class table: identity, not a returned error
					t.Errorf("errors.Is(%q, %v) = %v, want %v", got, c, !want, want)
				}
			}
			if !errors.Is(got, tt.err) {
				t.Errorf("%q does not wrap the original error", got)
			}
			if !strings.Contains(got.Error(), tt.text) {
				t.Errorf("text %q lacks %q", got, tt.text)
			}
			if strings.Contains(got.Error(), "deadbeef") {
				t.Errorf("text %q repeats the server's detail", got)
			}
			var pe *pgerr.Error
			if !errors.As(got, &pe) || pe.Class() != tt.class { //nolint:errorlint // Class returns the class sentinel itself, never a wrapper
				t.Errorf("Class of %q is not %v", got, tt.class)
			}
			if again := pgerr.Classify(got); again != got { //nolint:errorlint // idempotence: classifying twice returns the very same value
				t.Errorf("classifying twice changed %q into %q", got, again)
			}
			if tt.class == pgerr.ErrRetryable && !pgerr.IsRetryable(fmt.Errorf("op: %w", got)) { //nolint:errorlint // tt.class is an entry of the class table: identity
				t.Errorf("IsRetryable(%q) = false", got)
			}
		})
	}
}

func TestClassifyLeavesOthersAlone(t *testing.T) {
	if pgerr.Classify(nil) != nil {
		t.Error("Classify(nil) is not nil")
	}
	plain := errors.New("cannot scan into *string")
	if got := pgerr.Classify(plain); got != plain { //nolint:errorlint // "unchanged" means the very same value, not a wrapper
		t.Errorf("Classify(%q) = %q, want it unchanged", plain, got)
	}
	// An error that already carries a class keeps it: Classify never
	// reclassifies what a store method decided.
	decided := fmt.Errorf("consume: %w", errdefs.ErrFenced)
	if got := pgerr.Classify(decided); got != decided { //nolint:errorlint // "unchanged" means the very same value, not a wrapper
		t.Errorf("Classify(%q) = %q, want it unchanged", decided, got)
	}
}

// TestUnavailableIsARefusal: a database that cannot be reached, is out of
// connection slots or is starting up crosses a boundary as the refusal
// ErrDatabaseUnavailable (reason database_unavailable and a message that
// says what to do), still of class ErrObservationUnavailable; no other
// class is a refusal.
func TestUnavailableIsARefusal(t *testing.T) {
	dialErr := &net.OpError{Op: "dial", Net: "unix", Err: errors.New("connection refused")}
	for _, err := range []error{
		&pgconn.PgError{Code: "53300", Message: "sorry, too many clients already"},
		&pgconn.PgError{Code: "57P03", Message: "the database system is starting up"},
		fmt.Errorf("connect: %w", dialErr),
		io.ErrUnexpectedEOF,
	} {
		got := fmt.Errorf("create session: %w", pgerr.Classify(err))
		r, ok := errdefs.AsRefusal(got)
		if !ok || r.Reason != "database_unavailable" || r != pgerr.ErrDatabaseUnavailable { //nolint:errorlint // the refusal is the package's sentinel itself
			t.Errorf("%q: refusal %v %v, want database_unavailable", got, r, ok)
		}
		if !errors.Is(got, errdefs.ErrObservationUnavailable) {
			t.Errorf("%q is not of class ErrObservationUnavailable", got)
		}
	}
	for _, err := range []error{&pgconn.PgError{Code: "23505"}, &pgconn.PgError{Code: "40001"}, &pgconn.PgError{Code: "42703"}, pgx.ErrNoRows} {
		if r, ok := errdefs.AsRefusal(pgerr.Classify(err)); ok {
			t.Errorf("%v crosses as the refusal %s", err, r.Reason)
		}
	}
}
