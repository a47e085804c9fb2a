package files

import (
	"context"
	"errors"
	"log/slog"
	"path"
	"time"

	"github.com/google/uuid"

	runtimev1 "berth.dev/proto/berth/runtime/v1"
	"berth.dev/runtimebootstrap"
	"berth.dev/runtimebootstrap/filexfer"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/events"
	"berth.dev/core/projects"
	"berth.dev/core/store"
)

// Store is what file operations read and write: the owner-bound store,
// because admission and claims are fenced by the owner epoch.
type Store interface {
	projects.SessionReader
	SubmitFileOperation(ctx context.Context, p store.SubmitFileOperationParams) (store.FileOperation, error)
	GetFileOperation(ctx context.Context, id uuid.UUID) (store.FileOperation, error)
	ClaimFileOperation(ctx context.Context, c store.RuntimeConn) (store.FileOperation, bool, error)
	TransferOperation(ctx context.Context, id, deviceID uuid.UUID, credential runtimebootstrap.Secret) (store.FileOperation, error)
	FinishFileOperation(ctx context.Context, id uuid.UUID, r store.FileResult) (store.FileOperation, error)
	FailFileOperationsOfConnection(ctx context.Context, c store.RuntimeConn) ([]uuid.UUID, error)
	FailOrphanedFileOperations(ctx context.Context) ([]uuid.UUID, error)
}

// Writes lists the store methods this package alone calls: every write of
// file_operations. The one-writer test (writers_test.go) fails when
// another package of the core module calls one.
var Writes = []string{
	"SubmitFileOperation", "ClaimFileOperation", "FinishFileOperation",
	"FailFileOperationsOfConnection", "FailOrphanedFileOperations",
}

// Defaults of Limits (core/daemon/defaults.go re-exports them for its
// flags).
const (
	DefaultMaxBytes     = int64(1) << 30
	DefaultMaxFileBytes = int64(1) << 30
	DefaultMaxEntries   = int64(100_000)
	DefaultPerSession   = 4
	DefaultPerCore      = 64
	// DefaultAttachWait bounds how long an operation waits for its
	// Session's Runtime to take it: a suspended Session's wake or a new
	// Session's creation come first.
	DefaultAttachWait = 2 * time.Minute
	// DefaultStall bounds a transfer without progress either way.
	DefaultStall = 30 * time.Second
	// ChunkBytes bounds one data message either way (below the admin
	// server's 4 MiB message bound).
	ChunkBytes = runtimev1.MaxTransferChunk
	// sweepInterval is how often the owner fails orphaned operations.
	sweepInterval = 5 * time.Second
	// pollInterval is how often a waiting operation rereads its row (a
	// terminal cleanup or a Runtime without files ends it there).
	pollInterval = 500 * time.Millisecond
)

// Limits bounds file operations; zero fields take the defaults.
type Limits struct {
	MaxBytes, MaxFileBytes, MaxEntries int64
	PerSession, PerCore                int
	AttachWait, Stall                  time.Duration
}

func (l Limits) withDefaults() Limits {
	set := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	set(&l.MaxBytes, DefaultMaxBytes)
	set(&l.MaxFileBytes, DefaultMaxFileBytes)
	set(&l.MaxEntries, DefaultMaxEntries)
	if l.PerSession <= 0 {
		l.PerSession = DefaultPerSession
	}
	if l.PerCore <= 0 {
		l.PerCore = DefaultPerCore
	}
	if l.AttachWait <= 0 {
		l.AttachWait = DefaultAttachWait
	}
	if l.Stall <= 0 {
		l.Stall = DefaultStall
	}
	return l
}

// Format is how an operation's bytes are framed for the client.
type Format int

// The formats.
const (
	FormatTar Format = iota + 1
	FormatRaw
)

// UploadRequest is one upload.
type UploadRequest struct {
	SessionID, RequestID uuid.UUID
	// Path is relative to /workspace or absolute under it.
	Path   string
	Format Format
	// Mode is a raw file's permission bits (0: 0644).
	Mode        uint32
	NoOverwrite bool
	// Size is a raw file's length.
	Size int64
}

// DownloadRequest is one download.
type DownloadRequest struct {
	SessionID, RequestID uuid.UUID
	Path                 string
	Format               Format
}

// Result counts what an operation applied or sent.
type Result struct {
	store.FileCounts
	ModesMasked, Skipped int64
}

// Source yields an upload's bytes in chunks; io.EOF after the last.
type Source interface {
	Next() ([]byte, error)
}

// Sink receives a download: its header once, then data.
type Sink interface {
	Header(entries, bytes int64) error
	Data(p []byte) error
}

// Service is the file operation logic.
type Service struct {
	store   Store
	bus     *events.Bus
	newID   func() uuid.UUID
	limits  Limits
	log     *slog.Logger
	broker  *broker
	slots   chan struct{}
	refuses refusals
}

// New returns a Service; bus announces an admitted operation to the
// Session's Runtime connection (events.Session).
func New(st Store, bus *events.Bus, newID func() uuid.UUID, limits Limits, log *slog.Logger) *Service {
	limits = limits.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{store: st, bus: bus, newID: newID, limits: limits, log: log, broker: newBroker(),
		slots: make(chan struct{}, limits.PerCore), refuses: newRefusals(limits)}
}

// resolve checks a client path lexically: the clean path relative to the
// workspace.
func resolve(field, p string) (string, error) {
	rel, err := filexfer.ResolvePath(WorkspaceRoot, p)
	if err != nil {
		return "", pathRefusal(field, err)
	}
	return rel, nil
}

// WorkspaceRoot is the workspace's path in every sandbox.
const WorkspaceRoot = "/workspace"

// admit checks scope, takes a per-Core slot and admits the operation. The
// returned release ends it (failed with code unless finished) and frees
// the slot.
func (s *Service) admit(ctx context.Context, scope projects.Scope, session, request uuid.UUID, dir store.FileDirection) (store.FileOperation, error) {
	if err := projects.Visible(ctx, s.store, scope, session); err != nil {
		return store.FileOperation{}, err
	}
	select {
	case s.slots <- struct{}{}:
	default:
		return store.FileOperation{}, s.refuses.coreLimit
	}
	op, err := s.store.SubmitFileOperation(ctx, store.SubmitFileOperationParams{
		ID: s.newID(), SessionID: session, RequestID: request, Direction: dir, PerSession: s.limits.PerSession,
	})
	if err != nil {
		<-s.slots
		if errors.Is(err, store.ErrSessionFileLimit) {
			return store.FileOperation{}, s.refuses.sessionLimit
		}
		return store.FileOperation{}, err
	}
	return op, nil
}

// finish records op's end (failure code empty when it succeeded), unless
// it already ended (a terminal cleanup, the connection's end), and frees
// its slot. It returns the recorded failure code when the operation had
// already failed.
func (s *Service) finish(op store.FileOperation, code string, r Result) string {
	defer func() { <-s.slots }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := s.store.FinishFileOperation(ctx, op.ID, store.FileResult{FailureCode: code, Counts: r.FileCounts})
	if errors.Is(err, errdefs.ErrNotFound) {
		if got, gerr := s.store.GetFileOperation(ctx, op.ID); gerr == nil {
			return got.FailureCode
		}
		return ""
	}
	if err != nil {
		s.log.Warn("record file operation end failed", "operation", op.ID.String(), "error", err)
	}
	return ""
}

// Upload runs one upload: admission, the wait for the Runtime, and the
// transfer of src's bytes.
func (s *Service) Upload(ctx context.Context, scope projects.Scope, r UploadRequest, src Source) (Result, error) {
	dest, name, err := uploadTarget(r)
	if err != nil {
		return Result{}, err
	}
	op, err := s.admit(ctx, scope, r.SessionID, r.RequestID, store.FileUpload)
	if err != nil {
		return Result{}, err
	}
	spec := &runtimev1.OpenTransfer{
		TransferId: op.ID.String(), Direction: runtimev1.TransferDirection_TRANSFER_DIRECTION_UPLOAD, Path: dest,
		NoOverwrite: r.NoOverwrite, MaxBytes: s.limits.MaxBytes, MaxFileBytes: s.limits.MaxFileBytes, MaxEntries: s.limits.MaxEntries,
	}
	res, err := s.run(ctx, op, spec, func(ctx context.Context, t *transfer) (Result, error) {
		return s.upload(ctx, t, r, name, src)
	})
	s.log.Info("file upload ended", "operation", op.ID.String(), "session", r.SessionID.String(),
		"files", res.Files, "bytes", res.Bytes, "reason", reasonOf(err))
	return res, err
}

// uploadTarget checks an upload's path and format: the destination
// directory, and for a raw file its name in it.
func uploadTarget(r UploadRequest) (dest, name string, err error) {
	rel, err := resolve("header.path", r.Path)
	if err != nil {
		return "", "", err
	}
	switch r.Format {
	case FormatTar:
		return rel, "", nil
	case FormatRaw:
		if rel == "." {
			return "", "", errdefs.Invalid("header.path", "must name a file for format raw")
		}
		if r.Size < 0 {
			return "", "", errdefs.Invalid("header.size", "must not be negative")
		}
		if r.Mode&^0o7777 != 0 {
			return "", "", errdefs.Invalid("header.mode", "must be permission bits (at most 07777)")
		}
		return path.Dir(rel), path.Base(rel), nil
	}
	return "", "", errdefs.Invalid("header.format", "must be tar or raw")
}

// Download runs one download into sink.
func (s *Service) Download(ctx context.Context, scope projects.Scope, r DownloadRequest, sink Sink) (Result, error) {
	if r.Format != FormatTar && r.Format != FormatRaw {
		return Result{}, errdefs.Invalid("format", "must be tar or raw")
	}
	src, err := resolve("path", r.Path)
	if err != nil {
		return Result{}, err
	}
	if r.RequestID == uuid.Nil {
		r.RequestID = s.newID()
	}
	op, err := s.admit(ctx, scope, r.SessionID, r.RequestID, store.FileDownload)
	if err != nil {
		return Result{}, err
	}
	spec := &runtimev1.OpenTransfer{
		TransferId: op.ID.String(), Direction: runtimev1.TransferDirection_TRANSFER_DIRECTION_DOWNLOAD, Path: src,
		MaxBytes: s.limits.MaxBytes, MaxFileBytes: s.limits.MaxFileBytes, MaxEntries: s.limits.MaxEntries,
	}
	res, err := s.run(ctx, op, spec, func(ctx context.Context, t *transfer) (Result, error) {
		return s.download(ctx, t, r.Format, sink)
	})
	s.log.Info("file download ended", "operation", op.ID.String(), "session", r.SessionID.String(),
		"files", res.Files, "bytes", res.Bytes, "reason", reasonOf(err))
	return res, err
}

// run announces op, waits for its Runtime's Transfer stream, runs pump on
// it under the stall guard, and records the end.
func (s *Service) run(ctx context.Context, op store.FileOperation, spec *runtimev1.OpenTransfer,
	pump func(context.Context, *transfer) (Result, error)) (Result, error) {
	w := s.broker.register(op.ID, spec)
	defer s.broker.unregister(op.ID)
	s.bus.Publish(events.Event{Kind: events.Session, ID: op.SessionID})

	t, err := s.wait(ctx, op, w)
	if err != nil {
		return Result{}, s.ended(op, err, Result{})
	}
	defer t.release()
	res, err := pump(ctx, t)
	if err == nil {
		if code := s.finish(op, "", res); code != "" {
			return res, s.refuses.recorded(code)
		}
		return res, nil
	}
	return res, s.ended(op, err, res)
}

// ended records a failed operation and returns the error the caller
// sees: what the store recorded first wins (a terminal cleanup's code).
func (s *Service) ended(op store.FileOperation, err error, res Result) error {
	code := reasonOf(err)
	if code == "" {
		code = "file_operation_failed"
	}
	if recorded := s.finish(op, code, res); recorded != "" && recorded != code {
		return s.refuses.recorded(recorded)
	}
	return err
}

// wait waits until the Runtime's Transfer stream attaches, op ends in the
// store, the attach bound passes or ctx ends.
func (s *Service) wait(ctx context.Context, op store.FileOperation, w *waiter) (*transfer, error) {
	bound := time.NewTimer(s.limits.AttachWait)
	defer bound.Stop()
	poll := time.NewTicker(pollInterval)
	defer poll.Stop()
	for {
		select {
		case t := <-w.attached:
			return t, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-bound.C:
			return nil, s.refuses.notAttached
		case <-poll.C:
			got, err := s.store.GetFileOperation(ctx, op.ID)
			if err != nil {
				continue
			}
			if got.State.Terminal() {
				return nil, s.refuses.recorded(got.FailureCode)
			}
		}
	}
}

// reasonOf is err's fixed reason for the record and the log ("" for nil).
func reasonOf(err error) string {
	if err == nil {
		return ""
	}
	if r, ok := errdefs.AsRefusal(err); ok {
		return r.Reason
	}
	var fe *errdefs.FieldError
	if errors.As(err, &fe) {
		return "invalid_argument"
	}
	switch {
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	}
	return "file_operation_failed"
}

// pathRefusal turns filexfer's refusal of a client's path into its
// fixed refusal; any other error is a field error of field.
func pathRefusal(field string, err error) error {
	if reason, ok := filexfer.ReasonOf(err); ok {
		if rf, ok := fixed[reason]; ok {
			return rf
		}
	}
	return errdefs.Invalid(field, "is not a valid workspace path")
}
