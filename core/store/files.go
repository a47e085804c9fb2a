package store

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"berth.dev/core/store/db"
	"berth.dev/core/store/pgerr"
	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox/errdefs"
)

// FileDirection is which way a file operation's bytes go.
type FileDirection string

// The directions of a file operation.
const (
	FileUpload   FileDirection = "upload"
	FileDownload FileDirection = "download"
)

// FileOpState is a file operation's progress.
type FileOpState string

// The states of a file operation (migration 0033).
const (
	FilePending FileOpState = "pending"
	FileRunning FileOpState = "running"
	FileDone    FileOpState = "done"
	FileFailed  FileOpState = "failed"
)

// Terminal reports whether the operation ended.
func (s FileOpState) Terminal() bool { return s == FileDone || s == FileFailed }

// The failure codes the store itself records on a file operation.
const (
	// FileFailureRuntimeDisconnected: the connection it ran on closed.
	FileFailureRuntimeDisconnected = "runtime_disconnected"
	// FileFailureCoreRestarted: the Core that admitted it is gone.
	FileFailureCoreRestarted = "core_restarted"
)

// FileCounts is what a file operation applied or sent.
type FileCounts struct {
	Files, Directories, Symlinks, Hardlinks, Bytes int64
}

// FileOperation is one upload or download (the file_operations row).
type FileOperation struct {
	ID           uuid.UUID
	SessionID    uuid.UUID
	RequestID    uuid.UUID
	Direction    FileDirection
	State        FileOpState
	FailureCode  string
	ConnectionID *uuid.UUID
	CreatedAt    time.Time
	ClaimedAt    *time.Time
	EndedAt      *time.Time
	Counts       FileCounts
}

func fileOperationFromRow(r db.FileOperation) FileOperation {
	return FileOperation{
		ID: r.ID, SessionID: r.SessionID, RequestID: r.RequestID, Direction: FileDirection(r.Direction),
		State: FileOpState(r.State), FailureCode: r.FailureCode.String, ConnectionID: r.ConnectionID,
		CreatedAt: r.CreatedAt, ClaimedAt: r.ClaimedAt, EndedAt: r.EndedAt,
		Counts: FileCounts{Files: r.Files, Directories: r.Directories, Symlinks: r.Symlinks, Hardlinks: r.Hardlinks, Bytes: r.Bytes},
	}
}

// SubmitFileOperationParams is the input of SubmitFileOperation.
type SubmitFileOperationParams struct {
	ID, SessionID, RequestID uuid.UUID
	Direction                FileDirection
	// PerSession bounds the Session's pending and running operations
	// (ErrSessionFileLimit beyond it); it must be at least 1.
	PerSession int
}

// ErrSessionFileLimit refuses a file operation beyond the per-Session
// bound. core/files authors the refusal that names the bound's value.
var ErrSessionFileLimit = errors.New("the session has its bound of file operations pending or running")

// ErrRequestIDReused refuses a file operation whose request id the
// Session already used.
var ErrRequestIDReused error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "request_id_reused",
	"the session already ran a file operation with this request_id: use a new one")

// SubmitFileOperation admits a file operation as pending under the
// Session's share lock (as SubmitTurn): only for an active Session whose
// Environment has not ended, within the per-Session bound (counted under
// the Session's file admission lock, so racing admissions cannot both
// pass it). An operation
// for a Session whose compute is not running notifies its node's worker:
// that is the wake of a suspended Session, and it aborts a suspension
// under way (ClaimCapture reads session_idle_since). Refusals:
// ErrSessionNotActive, ErrSessionArchived, ErrEnvironmentEnded,
// ErrSessionFileLimit, ErrRequestIDReused; the owner's fence
// (ErrSuperseded): the operation lives in this Core's process.
func (s *Owner) SubmitFileOperation(ctx context.Context, p SubmitFileOperationParams) (FileOperation, error) {
	const op = "insert file operation"
	if p.ID == uuid.Nil || p.SessionID == uuid.Nil || p.RequestID == uuid.Nil {
		return FileOperation{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("id", "must be set"))
	}
	if p.Direction != FileUpload && p.Direction != FileDownload {
		return FileOperation{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("direction", "must be upload or download"))
	}
	if p.PerSession < 1 {
		return FileOperation{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("per_session", "must be at least 1"))
	}
	epoch, err := epochParam(s.epoch)
	if err != nil {
		return FileOperation{}, err
	}
	var out FileOperation
	err = s.ownedTx(ctx, func(q *db.Queries) error {
		env, err := lockLiveSession(ctx, q, p.SessionID)
		if err != nil {
			return err
		}
		if err := q.LockFileAdmission(ctx, p.SessionID); err != nil {
			return err
		}
		open, err := q.CountOpenFileOperations(ctx, p.SessionID)
		if err != nil {
			return err
		}
		if open >= int64(p.PerSession) {
			return ErrSessionFileLimit
		}
		row, err := q.InsertFileOperation(ctx, db.InsertFileOperationParams{
			ID: p.ID, SessionID: p.SessionID, RequestID: p.RequestID, Direction: string(p.Direction), OwnerEpoch: epoch,
		})
		if errors.Is(pgerr.Classify(err), errdefs.ErrExists) {
			return ErrRequestIDReused
		}
		if err != nil {
			return err
		}
		out = fileOperationFromRow(row)
		return wakeForWork(ctx, q, env.ID)
	})
	if err != nil {
		return FileOperation{}, wrap(op, err)
	}
	return out, nil
}

// GetFileOperation returns a file operation; ErrNotFound when there is
// none.
func (s *Reader) GetFileOperation(ctx context.Context, id uuid.UUID) (FileOperation, error) {
	row, err := s.q.GetFileOperation(ctx, id)
	if err != nil {
		return FileOperation{}, wrap("get file operation", err)
	}
	return fileOperationFromRow(row), nil
}

// ClaimFileOperation moves the oldest pending file operation of c's
// Session to running on c (see the query for every condition); ok is
// false when there is none to run now. A claimed operation is never
// claimed again.
func (s *Owner) ClaimFileOperation(ctx context.Context, c RuntimeConn) (FileOperation, bool, error) {
	epoch, err := epochParam(s.epoch)
	if err != nil {
		return FileOperation{}, false, err
	}
	conn, err := c.param()
	if err != nil {
		return FileOperation{}, false, fmt.Errorf("claim file operation: %w", err)
	}
	row, err := s.q.ClaimFileOperation(ctx, db.ClaimFileOperationParams{SessionID: c.session, ConnectionID: &conn, OwnerEpoch: epoch})
	if err != nil {
		if errors.Is(pgerr.Classify(err), errdefs.ErrNotFound) {
			return FileOperation{}, false, nil
		}
		return FileOperation{}, false, wrap("claim file operation", err)
	}
	return fileOperationFromRow(row), true, nil
}

// TransferOperation reads the running file operation id for a Transfer
// stream of device deviceID presenting credential: ErrNotFound unless
// that device's open connection, accepted under the lease holder's epoch,
// claimed it; ErrRuntimeCredential when the credential is not the
// device's. Only the credential's digest is compared.
func (s *Reader) TransferOperation(ctx context.Context, id, deviceID uuid.UUID, credential runtimebootstrap.Secret) (FileOperation, error) {
	row, err := s.q.GetTransferOperation(ctx, db.GetTransferOperationParams{ID: id, DeviceID: deviceID})
	if err != nil {
		return FileOperation{}, wrap("transfer operation", err)
	}
	digest := sha256.Sum256([]byte(credential.Reveal()))
	if subtle.ConstantTimeCompare(row.CredentialDigest, digest[:]) != 1 {
		return FileOperation{}, fmt.Errorf("transfer operation: %w", ErrRuntimeCredential)
	}
	return fileOperationFromRow(row.FileOperation), nil
}

// FileResult is how a file operation ended.
type FileResult struct {
	// FailureCode is empty for a done operation.
	FailureCode string
	Counts      FileCounts
}

// FinishFileOperation ends pending or running operation id with r; the
// first end stays (ErrNotFound when it already ended or never existed).
func (s *Owner) FinishFileOperation(ctx context.Context, id uuid.UUID, r FileResult) (FileOperation, error) {
	const op = "finish file operation"
	p := db.FinishFileOperationParams{
		ID: id, State: string(FileDone), Files: r.Counts.Files, Directories: r.Counts.Directories,
		Symlinks: r.Counts.Symlinks, Hardlinks: r.Counts.Hardlinks, Bytes: r.Counts.Bytes,
	}
	if r.FailureCode != "" {
		if !validFailureCode(r.FailureCode) {
			return FileOperation{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("failure_code", "must be a lowercase code"))
		}
		p.State, p.FailureCode = string(FileFailed), pgtype.Text{String: r.FailureCode, Valid: true}
	}
	row, err := s.q.FinishFileOperation(ctx, p)
	if err != nil {
		return FileOperation{}, wrap(op, err)
	}
	return fileOperationFromRow(row), nil
}

// FailFileOperationsOfConnection ends the operations running on closed
// connection c (runtime_disconnected) and returns their ids.
func (s *Owner) FailFileOperationsOfConnection(ctx context.Context, c RuntimeConn) ([]uuid.UUID, error) {
	conn, err := c.param()
	if err != nil {
		return nil, fmt.Errorf("fail file operations of connection: %w", err)
	}
	ids, err := s.q.FailFileOperationsOfConnection(ctx, &conn)
	if err != nil {
		return nil, wrap("fail file operations of connection", err)
	}
	return ids, nil
}

// FailOrphanedFileOperations ends the pending and running operations of
// another owner epoch (core_restarted) and those running on a closed
// connection (runtime_disconnected), and returns their ids. Only the
// current owner acts.
func (s *Owner) FailOrphanedFileOperations(ctx context.Context) ([]uuid.UUID, error) {
	epoch, err := epochParam(s.epoch)
	if err != nil {
		return nil, err
	}
	ids, err := s.q.FailOrphanedFileOperations(ctx, epoch)
	if err != nil {
		return nil, wrap("fail orphaned file operations", err)
	}
	return ids, nil
}
