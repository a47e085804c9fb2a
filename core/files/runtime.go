package files

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	runtimev1 "berth.dev/proto/berth/runtime/v1"
	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/store"
)

// The Runtime side of file operations. The Runtime gateway (core/gateway)
// claims, fails and attaches operations only through these methods.

// ErrNotClaimed refuses a Transfer stream whose operation is not claimed
// by the device's current connection, or that no admin call waits for.
var ErrNotClaimed = errors.New("the transfer's operation is not claimed by this connection")

// Claim claims the next pending operation of conn's Session and returns
// what to send as open_transfer. files is whether the connection's Runtime
// announced the files capability: an operation claimed by one that did not
// fails runtime_lacks_files at once (ok false, nothing to send). An
// operation no admin call waits for any more fails too.
func (s *Service) Claim(ctx context.Context, conn store.RuntimeConn, files bool) (spec *runtimev1.OpenTransfer, ok bool, err error) {
	for {
		op, claimed, err := s.store.ClaimFileOperation(ctx, conn)
		if err != nil || !claimed {
			return nil, false, err
		}
		w, waiting := s.broker.lookup(op.ID)
		switch {
		case !files:
			s.failClaimed(ctx, op.ID, ReasonRuntimeLacksFiles)
		case !waiting:
			s.failClaimed(ctx, op.ID, ReasonInterrupted)
		default:
			return w.spec, true, nil
		}
	}
}

func (s *Service) failClaimed(ctx context.Context, id uuid.UUID, code string) {
	if _, err := s.store.FinishFileOperation(ctx, id, store.FileResult{FailureCode: code}); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		s.log.Warn("record file operation end failed", "operation", id.String(), "error", err)
	}
}

// ConnectionClosed fails the operations running on a closed connection
// (runtime_disconnected); their admin calls end interrupted.
func (s *Service) ConnectionClosed(ctx context.Context, conn store.RuntimeConn) error {
	_, err := s.store.FailFileOperationsOfConnection(ctx, conn)
	return err
}

// Attach serves a Transfer stream after its hello: the device presenting
// credential must have claimed operation id on its open connection, and
// an admin call must wait for it. It returns when the admin call is done
// with the stream (nil) or refuses: ErrNotClaimed, or
// store.ErrRuntimeCredential for a credential that is not the device's.
func (s *Service) Attach(ctx context.Context, id, device uuid.UUID, credential runtimebootstrap.Secret, st Stream) error {
	if _, err := s.store.TransferOperation(ctx, id, device, credential); err != nil {
		if errors.Is(err, store.ErrRuntimeCredential) {
			return err
		}
		if errors.Is(err, errdefs.ErrNotFound) {
			return ErrNotClaimed
		}
		return err
	}
	if _, waiting := s.broker.lookup(id); !waiting {
		return ErrNotClaimed
	}
	if err := st.Send(&runtimev1.TransferResponse{Message: &runtimev1.TransferResponse_Accepted{Accepted: &runtimev1.TransferAccepted{}}}); err != nil {
		return nil
	}
	if err := s.broker.attach(ctx, id, st); errors.Is(err, errNotWaiting) {
		return ErrNotClaimed
	}
	return nil
}

// Run fails, every sweepInterval until ctx ends, the operations orphaned
// by another owner epoch or a closed connection.
func (s *Service) Run(ctx context.Context) error {
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		ids, err := s.store.FailOrphanedFileOperations(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("fail orphaned file operations failed", "error", err)
			}
			continue
		}
		if len(ids) > 0 {
			s.log.Info("failed orphaned file operations", "count", len(ids))
		}
	}
}
