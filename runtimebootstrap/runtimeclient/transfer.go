package runtimeclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"

	runtimev1 "berth.dev/proto/berth/runtime/v1"
	"berth.dev/runtimebootstrap/filexfer"
)

// transferDrain bounds how long a quiesce waits for running transfers
// before it answers quiesce_rejected(file_work_pending). A variable so
// that tests can shorten it.
var transferDrain = 30 * time.Second

// transferStream is the Runtime's side of one Transfer stream.
type transferStream = grpc.BidiStreamingClient[runtimev1.TransferRequest, runtimev1.TransferResponse]

// openTransfer starts the operation ot asks for on its own Transfer
// stream, unless admission is closed or ot is malformed (both only
// logged: Core's operation then fails on its side). The receive loop
// calls it, so it never races a quiesce's drain.
func (s *session) openTransfer(ctx context.Context, ot *runtimev1.OpenTransfer) {
	id := ot.GetTransferId()
	if s.quiesced {
		s.c.log.Warn("ignored an open_transfer after quiesce", "transfer_id", safeID(id))
		return
	}
	dir := ot.GetDirection()
	if !validUUID(id) || (dir != runtimev1.TransferDirection_TRANSFER_DIRECTION_UPLOAD && dir != runtimev1.TransferDirection_TRANSFER_DIRECTION_DOWNLOAD) {
		s.c.log.Warn("ignored an invalid open_transfer")
		return
	}
	s.transfers.Add(1)
	go func() {
		defer s.transfers.Done()
		s.runTransfer(ctx, ot)
	}()
}

// validUUID reports whether id is a UUID in its canonical 36-byte form.
func validUUID(id string) bool {
	_, err := uuid.Parse(id)
	return err == nil && len(id) == 36
}

// safeID is id when it is a UUID, for logging; "" otherwise.
func safeID(id string) string {
	if validUUID(id) {
		return id
	}
	return ""
}

// drainTransfers waits for the running transfers up to transferDrain and
// reports whether none is left. Only the receive loop starts transfers,
// and it is the caller, so none starts meanwhile.
func (s *session) drainTransfers() bool {
	done := make(chan struct{})
	go func() {
		s.transfers.Wait()
		close(done)
	}()
	t := time.NewTimer(transferDrain)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// runTransfer opens the Transfer stream on the connection's ClientConn,
// says hello and, once Core accepts, runs the operation. The stream's
// context is the connection's: a connection's end ends its transfers.
func (s *session) runTransfer(ctx context.Context, ot *runtimev1.OpenTransfer) {
	log := s.c.log.With("transfer_id", ot.GetTransferId())
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := runtimev1.NewRuntimeGatewayServiceClient(s.conn).Transfer(tctx)
	if err != nil {
		log.Warn("transfer stream could not be opened")
		return
	}
	if err := stream.Send(&runtimev1.TransferRequest{Message: &runtimev1.TransferRequest_Hello{Hello: &runtimev1.TransferHello{
		ProtocolVersion: runtimev1.ProtocolVersion,
		DeviceId:        s.c.cfg.Bootstrap.DeviceID,
		Credential:      s.c.cfg.Bootstrap.Credential.Reveal(),
		TransferId:      ot.GetTransferId(),
	}}}); err != nil {
		_, err = stream.Recv()
		code, reason := errorReason(err)
		log.Warn("transfer not accepted", "code", code, "reason", reason)
		return
	}
	first, err := stream.Recv()
	if err != nil || first.GetAccepted() == nil {
		code, reason := errorReason(err)
		log.Warn("transfer not accepted", "code", code, "reason", reason)
		return
	}
	if ot.GetDirection() == runtimev1.TransferDirection_TRANSFER_DIRECTION_UPLOAD {
		s.c.upload(log, stream, ot)
	} else {
		s.c.download(log, stream, ot)
	}
}

// limits are an open_transfer's bounds.
func limits(ot *runtimev1.OpenTransfer) filexfer.Limits {
	return filexfer.Limits{MaxBytes: ot.GetMaxBytes(), MaxFileBytes: ot.GetMaxFileBytes(), MaxEntries: ot.GetMaxEntries()}
}

// upload applies Core's entries with a filexfer.Writer until commit (done)
// or a refusal (refused). Anything out of protocol, a failure that is not
// a refusal, or the stream's end stops it without a word; the Writer's
// Close removes its unfinished temporary file in every case, and before
// the answer, so Core never hears done or refused while one is left.
func (c *Client) upload(log logger, stream transferStream, ot *runtimev1.OpenTransfer) {
	dest, err := filexfer.ResolvePath(filexfer.DefaultWorkspacePath, ot.GetPath())
	if err != nil {
		refused(log, stream, err)
		return
	}
	w, err := filexfer.NewWriter(filexfer.WriterConfig{
		Root:        c.workspaceRoot(),
		Dest:        dest,
		OpID:        ot.GetTransferId(),
		JournalDir:  c.journalDir,
		NoOverwrite: ot.GetNoOverwrite(),
		Limits:      limits(ot),
	})
	if err != nil {
		refused(log, stream, err)
		return
	}
	defer w.Close()
	for {
		msg, err := stream.Recv()
		if err != nil {
			code, reason := errorReason(err)
			log.Warn("upload ended before its commit", "code", code, "reason", reason, "entries", w.Stats().Entries)
			return
		}
		switch m := msg.GetMessage().(type) {
		case *runtimev1.TransferResponse_Entry:
			err = w.Begin(toEntry(m.Entry))
		case *runtimev1.TransferResponse_Data:
			if len(m.Data) > runtimev1.MaxTransferChunk {
				log.Warn("ending the upload: core sent a chunk over the bound")
				_ = stream.CloseSend()
				return
			}
			_, err = w.Write(m.Data)
		case *runtimev1.TransferResponse_Commit:
			if err = w.Commit(); err == nil {
				st := w.Stats()
				_ = w.Close() // removes the journal
				if sendErr := stream.Send(doneMessage(st)); sendErr == nil {
					log.Info("upload done", "files", st.Files, "directories", st.Dirs, "symlinks", st.Symlinks,
						"hardlinks", st.Hardlinks, "bytes", st.Bytes, "modes_masked", st.ModesMasked)
				}
				closeAndDrain(stream)
				return
			}
		default:
			log.Warn("ending the upload: core's message is out of protocol")
			_ = stream.CloseSend()
			return
		}
		if err != nil {
			_ = w.Close()
			refused(log, stream, err)
			return
		}
	}
}

// download sends the tree at open_transfer.path: summary, then every
// entry and its data, then done; or refused.
func (c *Client) download(log logger, stream transferStream, ot *runtimev1.OpenTransfer) {
	p, err := filexfer.ResolvePath(filexfer.DefaultWorkspacePath, ot.GetPath())
	if err != nil {
		refused(log, stream, err)
		return
	}
	cfg := filexfer.ReaderConfig{Root: c.workspaceRoot(), Path: p, Limits: limits(ot)}
	sum, err := filexfer.Measure(cfg)
	if err != nil {
		refused(log, stream, err)
		return
	}
	dir, err := isDirectory(cfg.Root, p)
	if err != nil {
		refused(log, stream, err)
		return
	}
	if err := stream.Send(&runtimev1.TransferRequest{Message: &runtimev1.TransferRequest_Summary{
		Summary: &runtimev1.TransferSummary{Entries: sum.Entries, Bytes: sum.Bytes, Directory: dir},
	}}); err != nil {
		log.Warn("download ended: the stream broke")
		return
	}
	buf := make([]byte, runtimev1.MaxTransferChunk)
	st, err := filexfer.Walk(cfg, func(e filexfer.Entry, r io.Reader) error {
		if err := stream.Send(&runtimev1.TransferRequest{Message: &runtimev1.TransferRequest_Entry{Entry: fromEntry(e)}}); err != nil {
			return errStreamBroken
		}
		if r == nil {
			return nil
		}
		for {
			n, err := io.ReadFull(r, buf)
			if n > 0 {
				// Send marshals the message before it returns, so buf is
				// free again afterwards.
				if err := stream.Send(&runtimev1.TransferRequest{Message: &runtimev1.TransferRequest_Data{Data: buf[:n]}}); err != nil {
					return errStreamBroken
				}
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil
			}
			if err != nil {
				return err
			}
		}
	})
	if err != nil {
		if errors.Is(err, errStreamBroken) {
			log.Warn("download ended: the stream broke", "entries", st.Entries)
			return
		}
		refused(log, stream, err)
		return
	}
	if err := stream.Send(doneMessage(st)); err == nil {
		log.Info("download done", "files", st.Files, "directories", st.Dirs, "symlinks", st.Symlinks,
			"hardlinks", st.Hardlinks, "bytes", st.Bytes, "skipped", st.Skipped)
	}
	closeAndDrain(stream)
}

// errStreamBroken: a Send on the Transfer stream failed; Core is gone or
// ended the operation.
var errStreamBroken = errors.New("transfer stream broken")

// logger is the part of *slog.Logger the transfers use.
type logger interface {
	Info(msg string, args ...any)
	Warn(msg string, args ...any)
	Error(msg string, args ...any)
}

// refused answers a refusal with its fixed reason and ends the stream; an
// error that is not a refusal is only logged (its text may name paths)
// and the stream ends without an answer.
func refused(log logger, stream transferStream, err error) {
	var r *filexfer.Refusal
	if !errors.As(err, &r) {
		log.Error("transfer failed inside the runtime")
		_ = stream.CloseSend()
		return
	}
	log.Info("transfer refused", "reason", r.Reason, "entry", r.Entry)
	_ = stream.Send(&runtimev1.TransferRequest{Message: &runtimev1.TransferRequest_Refused{
		Refused: &runtimev1.TransferRefused{Reason: r.Reason, Entry: r.Entry},
	}})
	closeAndDrain(stream)
}

// closeAndDrain ends the Runtime's side and reads Core's remaining
// messages (data sent before Core saw the answer) until Core ends the
// stream; the connection's context bounds the wait.
func closeAndDrain(stream transferStream) {
	_ = stream.CloseSend()
	for {
		if _, err := stream.Recv(); err != nil {
			return
		}
	}
}

func doneMessage(st filexfer.Stats) *runtimev1.TransferRequest {
	return &runtimev1.TransferRequest{Message: &runtimev1.TransferRequest_Done{Done: &runtimev1.TransferDone{
		Files: st.Files, Directories: st.Dirs, Symlinks: st.Symlinks, Hardlinks: st.Hardlinks,
		Bytes: st.Bytes, ModesMasked: st.ModesMasked, Skipped: st.Skipped,
	}}}
}

var kinds = map[runtimev1.FileEntry_Kind]filexfer.Kind{
	runtimev1.FileEntry_KIND_FILE:      filexfer.KindFile,
	runtimev1.FileEntry_KIND_DIRECTORY: filexfer.KindDir,
	runtimev1.FileEntry_KIND_SYMLINK:   filexfer.KindSymlink,
	runtimev1.FileEntry_KIND_HARDLINK:  filexfer.KindHardlink,
}

// toEntry maps a wire entry; an unknown kind maps to the zero Kind, which
// the Writer refuses (invalid_archive).
func toEntry(fe *runtimev1.FileEntry) filexfer.Entry {
	e := filexfer.Entry{
		Name: fe.GetName(),
		Kind: kinds[fe.GetKind()],
		Mode: filexfer.ModeFromUnix(fe.GetMode()),
		Size: fe.GetSize(),
		Link: fe.GetLinkTarget(),
	}
	if ns := fe.GetMtimeUnixNano(); ns != 0 {
		e.ModTime = time.Unix(0, ns)
	}
	return e
}

func fromEntry(e filexfer.Entry) *runtimev1.FileEntry {
	fe := &runtimev1.FileEntry{Name: e.Name, Mode: filexfer.UnixMode(e.Mode), Size: e.Size, LinkTarget: e.Link}
	for k, v := range kinds {
		if v == e.Kind {
			fe.Kind = k
		}
	}
	if !e.ModTime.IsZero() {
		fe.MtimeUnixNano = e.ModTime.UnixNano()
	}
	return fe
}

// isDirectory reports whether p (clean, relative to root) is a directory,
// reading it through an os.Root so no link leads outside.
func isDirectory(root, p string) (bool, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return false, fmt.Errorf("open workspace: %w", err)
	}
	defer r.Close()
	fi, err := r.Lstat(p)
	if err != nil {
		return false, &filexfer.Refusal{Reason: filexfer.ReasonNotFound, Entry: -1}
	}
	return fi.IsDir(), nil
}
