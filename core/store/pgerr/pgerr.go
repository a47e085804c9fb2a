package pgerr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"berth.dev/sandbox/errdefs"
)

// ErrRetryable is the class of a transaction that PostgreSQL aborted to
// resolve a conflict with a concurrent one (serialization failure,
// deadlock, lock timeout). The transaction had no effect, so running the
// whole transaction again is safe; it is not an errdefs class because it
// never leaves Core's store layer.
var ErrRetryable = errors.New("retryable database conflict")

// IsRetryable reports whether err is of class ErrRetryable.
func IsRetryable(err error) bool { return errors.Is(err, ErrRetryable) }

// ErrDatabaseUnavailable is how an error of class
// errdefs.ErrObservationUnavailable that Classify made (the database could
// not be reached, is out of connection slots, starting up or shutting
// down, or did not answer in time) crosses a boundary that sends refusals
// (the admin API): reason database_unavailable and a message that says
// what to do, instead of the class's generic observation_unavailable,
// which the admin API also reports for a node's compute. errors.As finds
// it on such an error; errors.Is(err, errdefs.ErrObservationUnavailable)
// still holds. The message promises nothing about a write's outcome: the
// caller retries, with the same request_id where the call takes one.
var ErrDatabaseUnavailable = errdefs.Refuse(errdefs.ErrObservationUnavailable, "database_unavailable",
	"the database is unavailable (down, starting up or out of connection slots): retry once it is back, with the same request_id where the call takes one")

// SQLSTATE codes that Classify distinguishes
// (https://www.postgresql.org/docs/current/errcodes-appendix.html).
const (
	codeUniqueViolation      = "23505"
	codeExclusionViolation   = "23P01"
	codeForeignKeyViolation  = "23503"
	codeCheckViolation       = "23514"
	codeNotNullViolation     = "23502"
	codeRestrictViolation    = "23001"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeLockNotAvailable     = "55P03"
	codeQueryCanceled        = "57014"
	codeAdminShutdown        = "57P01"
	codeCrashShutdown        = "57P02"
	codeCannotConnectNow     = "57P03"
	codeReadOnlyTransaction  = "25006"
	codeInvalidCatalogName   = "3D000"
)

// Error is a database failure that went through Classify. Its text is
// authored here; Unwrap returns the original error, so errors.As still
// reaches *pgconn.PgError (for its constraint name) or a context error.
type Error struct {
	class error // nil: the server reported an error without a class
	text  string
	cause error
}

func (e *Error) Error() string {
	if e.class == nil {
		return e.text
	}
	return e.text + ": " + e.class.Error()
}

// Is reports whether target is e's class.
func (e *Error) Is(target error) bool { return e.class != nil && target == e.class }

// Unwrap returns the original error.
func (e *Error) Unwrap() error { return e.cause }

// As lets errors.As find ErrDatabaseUnavailable on an error of class
// errdefs.ErrObservationUnavailable, so a boundary that sends refusals
// names the database (the chain itself holds only the driver's error).
func (e *Error) As(target any) bool {
	r, ok := target.(**errdefs.Refusal)
	if !ok || e.class != errdefs.ErrObservationUnavailable { //nolint:errorlint // the class is the sentinel itself, never a wrapper
		return false
	}
	*r = ErrDatabaseUnavailable
	return true
}

// Class returns e's class: an errdefs sentinel, ErrRetryable, or nil for a
// server error without a class (an unknown outcome).
func (e *Error) Class() error { return e.class }

// Classify returns err marked with its class. A server error without a
// class comes back as an *Error whose Class is nil (an unknown outcome);
// any other error, and one already classified, comes back unchanged. It
// returns nil for nil.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	var done *Error
	if errors.As(err, &done) {
		return err
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return &Error{class: errdefs.ErrNotFound, text: "no such row", cause: err}
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return classifyServer(pg, err)
	}
	if unavailable(err) {
		// The driver's text says why (dial error, timeout); it names the
		// user, database and socket, never a password.
		return &Error{class: errdefs.ErrObservationUnavailable, text: "database unavailable (" + err.Error() + ")", cause: err}
	}
	return err
}

// classifyServer classifies an error the server reported.
func classifyServer(pg *pgconn.PgError, err error) error {
	class, text := errdefs.ErrInvalid, ""
	switch code := pg.Code; {
	case code == codeUniqueViolation || code == codeExclusionViolation:
		class, text = errdefs.ErrExists, "constraint "+name(pg.ConstraintName)+" violated"
	case code == codeForeignKeyViolation || code == codeCheckViolation || code == codeRestrictViolation:
		text = "constraint " + name(pg.ConstraintName) + " violated"
	case code == codeNotNullViolation:
		text = "null value in " + name(pg.TableName) + "." + name(pg.ColumnName)
	case strings.HasPrefix(code, "22"): // data exception
		text = "invalid data (SQLSTATE " + code + ")"
	case code == codeSerializationFailure:
		class, text = ErrRetryable, "serialization failure"
	case code == codeDeadlockDetected:
		class, text = ErrRetryable, "deadlock detected"
	case code == codeLockNotAvailable:
		class, text = ErrRetryable, "lock not available"
	case strings.HasPrefix(code, "08"), // connection exception
		strings.HasPrefix(code, "53"), // insufficient resources
		strings.HasPrefix(code, "28"), // invalid authorization
		code == codeQueryCanceled, code == codeAdminShutdown, code == codeCrashShutdown,
		code == codeCannotConnectNow, code == codeReadOnlyTransaction, code == codeInvalidCatalogName:
		// The server's message says why (authentication, shutdown,
		// limits) and quotes no row values.
		class, text = errdefs.ErrObservationUnavailable, "database unavailable (SQLSTATE "+code+": "+pg.Message+")"
	default:
		// The primary message is the server's and names schema objects;
		// the detail line, which may quote values, is left out.
		return &Error{text: fmt.Sprintf("database error (SQLSTATE %s): %s", pg.Code, pg.Message), cause: err}
	}
	return &Error{class: class, text: text, cause: err}
}

// unavailable reports whether err means the database could not be reached
// or did not answer in time.
func unavailable(err error) bool {
	var connect *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connect), errors.As(err, &netErr),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, pgconn.ErrConnClosed),
		pgconn.Timeout(err), pgconn.SafeToRetry(err):
		return true
	}
	return false
}

func name(s string) string {
	if s == "" {
		return "(unnamed)"
	}
	return s
}
