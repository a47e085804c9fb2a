package files

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	runtimev1 "berth.dev/proto/berth/runtime/v1"
	"berth.dev/runtimebootstrap/filexfer"
)

// guard ends a transfer that made no progress for its bound: it releases
// the Runtime's stream (its handler returns, the stream ends) and cancels
// the pump's context, so every blocked step returns.
type guard struct {
	timer  *time.Timer
	bound  time.Duration
	fired  atomic.Bool
	cancel context.CancelFunc
}

func newGuard(ctx context.Context, bound time.Duration, t *transfer) (*guard, context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	g := &guard{bound: bound, cancel: cancel}
	g.timer = time.AfterFunc(bound, func() {
		g.fired.Store(true)
		cancel()
		t.release()
	})
	return g, ctx
}

func (g *guard) progress() { g.timer.Reset(g.bound) }

func (g *guard) stop() {
	g.timer.Stop()
	g.cancel()
}

// blame is the error of a failed step: stalled when the guard fired.
func (g *guard) blame(s *Service, err error) error {
	if g.fired.Load() {
		return s.refuses.stalled
	}
	return err
}

// source reads an upload's chunks as a byte stream, on a goroutine of its
// own so that a stalled client cannot hold the pump past its guard.
type source struct {
	ctx context.Context
	// stop closes when the Runtime answered or its stream ended: the
	// client's bytes are no longer wanted.
	stop   <-chan struct{}
	g      *guard
	chunks chan chunk
	cur    []byte
	err    error
	once   sync.Once
	src    Source
}

type chunk struct {
	data []byte
	err  error
}

func newSource(ctx context.Context, stop <-chan struct{}, g *guard, src Source) *source {
	return &source{ctx: ctx, stop: stop, g: g, chunks: make(chan chunk), src: src}
}

func (r *source) start() {
	go func() {
		for {
			b, err := r.src.Next()
			select {
			case r.chunks <- chunk{b, err}:
			case <-r.ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
}

// Read implements io.Reader; the stream's end is io.EOF.
func (r *source) Read(p []byte) (int, error) {
	r.once.Do(r.start)
	for len(r.cur) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		select {
		case c := <-r.chunks:
			r.g.progress()
			r.cur, r.err = c.data, c.err
			if r.err != nil && !errors.Is(r.err, io.EOF) {
				r.err = clientErr{r.err}
			}
		case <-r.ctx.Done():
			r.err = r.ctx.Err()
		case <-r.stop:
			r.err = errRuntimeGone
		}
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// errArchive marks a client's archive that does not parse or does not
// match its sizes.
var errArchive = errors.New("invalid archive")

// upload pumps src to the Runtime as entries and waits for its answer.
func (s *Service) upload(ctx context.Context, t *transfer, r UploadRequest, rawName string, src Source) (Result, error) {
	g, ctx := newGuard(ctx, s.limits.Stall, t)
	defer g.stop()
	answer := make(chan *runtimev1.TransferRequest, 1)
	answered := make(chan struct{})
	go func() {
		m, err := t.Recv()
		if err != nil {
			m = nil
		}
		answer <- m
		close(answered)
	}()
	in := newSource(ctx, answered, g, src)
	send := func(m *runtimev1.TransferResponse) error {
		if err := t.Send(m); err != nil {
			return errRuntimeGone
		}
		g.progress()
		return nil
	}
	var err error
	if r.Format == FormatRaw {
		err = s.sendRaw(in, send, rawName, r)
	} else {
		err = s.sendTar(in, send)
	}
	if err == nil {
		err = send(&runtimev1.TransferResponse{Message: &runtimev1.TransferResponse_Commit{Commit: &runtimev1.TransferCommit{}}})
	}
	switch {
	case err == nil, errors.Is(err, errRuntimeGone):
		// The Runtime answers done or refused (a refusal ends its stream
		// early, which is what failed a send).
	case errors.Is(err, errArchive):
		return Result{}, s.refuses.of(filexfer.ReasonInvalidArchive)
	default:
		return Result{}, g.blame(s, err)
	}
	var m *runtimev1.TransferRequest
	select {
	case m = <-answer:
	case <-ctx.Done():
		return Result{}, g.blame(s, ctx.Err())
	}
	switch a := m.GetMessage().(type) {
	case *runtimev1.TransferRequest_Done:
		if err != nil {
			return Result{}, s.refuses.interrupted
		}
		return resultOf(a.Done), nil
	case *runtimev1.TransferRequest_Refused:
		return Result{}, s.refuses.of(a.Refused.GetReason())
	}
	return Result{}, g.blame(s, s.refuses.interrupted)
}

// errRuntimeGone: a send to the Runtime failed; its stream ended.
var errRuntimeGone = errors.New("runtime stream ended")

// sendTar parses the client's tar as a stream and forwards its entries,
// checking each lexically and against the bounds before any byte.
func (s *Service) sendTar(in io.Reader, send func(*runtimev1.TransferResponse) error) error {
	tr := tar.NewReader(in)
	seen := map[string]struct{}{}
	var entries, total int64
	buf := make([]byte, ChunkBytes)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return archiveErr(err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		e, err := filexfer.FromTarHeader(h)
		if err != nil {
			return s.refusalOf(err)
		}
		entries++
		total += e.Size
		switch {
		case entries > s.limits.MaxEntries:
			return s.refuses.of(filexfer.ReasonTooManyEntries)
		case e.Size > s.limits.MaxFileBytes:
			return s.refuses.of(filexfer.ReasonFileTooLarge)
		case total > s.limits.MaxBytes:
			return s.refuses.of(filexfer.ReasonUploadTooLarge)
		}
		if _, dup := seen[e.Name]; dup {
			return s.refuses.of(filexfer.ReasonDuplicateEntry)
		}
		seen[e.Name] = struct{}{}
		if err := send(entryMessage(e)); err != nil {
			return err
		}
		if e.Kind != filexfer.KindFile {
			continue
		}
		if err := copyData(tr, e.Size, buf, send); err != nil {
			return err
		}
	}
	// Whatever follows the archive's end (padding) is read and dropped.
	if _, err := io.Copy(io.Discard, in); err != nil {
		return archiveErr(err)
	}
	return nil
}

// sendRaw forwards one file of r.Size bytes.
func (s *Service) sendRaw(in io.Reader, send func(*runtimev1.TransferResponse) error, name string, r UploadRequest) error {
	switch {
	case r.Size > s.limits.MaxFileBytes:
		return s.refuses.of(filexfer.ReasonFileTooLarge)
	case r.Size > s.limits.MaxBytes:
		return s.refuses.of(filexfer.ReasonUploadTooLarge)
	}
	mode := r.Mode
	if mode == 0 {
		mode = 0o644
	}
	e := filexfer.Entry{Name: name, Kind: filexfer.KindFile, Mode: filexfer.ModeFromUnix(mode), Size: r.Size}
	if err := send(entryMessage(e)); err != nil {
		return err
	}
	if err := copyData(in, r.Size, make([]byte, ChunkBytes), send); err != nil {
		return err
	}
	var one [1]byte
	if n, err := io.ReadFull(in, one[:]); n > 0 {
		return errArchive // more bytes than the declared size
	} else if !errors.Is(err, io.EOF) {
		return archiveErr(err)
	}
	return nil
}

// copyData sends exactly size bytes of in as data messages.
func copyData(in io.Reader, size int64, buf []byte, send func(*runtimev1.TransferResponse) error) error {
	for size > 0 {
		n := int64(len(buf))
		if size < n {
			n = size
		}
		if _, err := io.ReadFull(in, buf[:n]); err != nil {
			return archiveErr(err)
		}
		if err := send(&runtimev1.TransferResponse{Message: &runtimev1.TransferResponse_Data{Data: buf[:n]}}); err != nil {
			return err
		}
		size -= n
	}
	return nil
}

// archiveErr is a read failure of the client's bytes: the client's own
// end (its stream's error, the context, the stall guard) as it is, and
// anything else the archive's fault.
func archiveErr(err error) error {
	if errors.Is(err, errRuntimeGone) {
		return err
	}
	var ce clientErr
	if errors.As(err, &ce) {
		return ce.err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return errArchive
}

// clientErr marks the client stream's own failure (not its end).
type clientErr struct{ err error }

func (e clientErr) Error() string { return "client stream: " + e.err.Error() }

// refusalOf maps a filexfer refusal to its admin refusal.
func (s *Service) refusalOf(err error) error {
	if reason, ok := filexfer.ReasonOf(err); ok {
		return s.refuses.of(reason)
	}
	return err
}

// download pumps the Runtime's entries to sink, as a tar or one file's
// bytes.
func (s *Service) download(ctx context.Context, t *transfer, format Format, sink Sink) (Result, error) {
	g, ctx := newGuard(ctx, s.limits.Stall, t)
	defer g.stop()
	recv := func() (*runtimev1.TransferRequest, error) {
		m, err := t.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return nil, g.blame(s, ctx.Err())
			}
			return nil, g.blame(s, s.refuses.interrupted)
		}
		g.progress()
		return m, nil
	}
	m, err := recv()
	if err != nil {
		return Result{}, err
	}
	switch a := m.GetMessage().(type) {
	case *runtimev1.TransferRequest_Summary:
		if format == FormatRaw && a.Summary.GetDirectory() {
			return Result{}, s.refuses.of(filexfer.ReasonNotRegular)
		}
		if err := sink.Header(a.Summary.GetEntries(), a.Summary.GetBytes()); err != nil {
			return Result{}, err
		}
	case *runtimev1.TransferRequest_Refused:
		return Result{}, s.refuses.of(a.Refused.GetReason())
	default:
		return Result{}, s.refuses.interrupted
	}
	w := newDownloadWriter(s, sink, g, format)
	for {
		m, err := recv()
		if err != nil {
			return Result{}, err
		}
		if done, res, err := w.apply(m); done || err != nil {
			return res, err
		}
	}
}

// downloadWriter frames a download's entries for the client: a tar, or
// one file's bytes.
type downloadWriter struct {
	s     *Service
	out   *chunker
	tw    *tar.Writer // nil for a raw download
	total int64
}

func newDownloadWriter(s *Service, sink Sink, g *guard, format Format) *downloadWriter {
	w := &downloadWriter{s: s, out: &chunker{sink: sink, g: g, buf: make([]byte, 0, ChunkBytes)}}
	if format == FormatTar {
		w.tw = tar.NewWriter(w.out)
	}
	return w
}

// apply takes one Runtime message; done is true at the download's end.
func (w *downloadWriter) apply(m *runtimev1.TransferRequest) (done bool, res Result, err error) {
	s := w.s
	switch a := m.GetMessage().(type) {
	case *runtimev1.TransferRequest_Entry:
		return false, Result{}, w.entry(a.Entry)
	case *runtimev1.TransferRequest_Data:
		var err error
		if w.tw != nil {
			_, err = w.tw.Write(a.Data)
		} else {
			_, err = w.out.Write(a.Data)
		}
		if err != nil {
			return true, Result{}, sinkErr(s, err)
		}
		return false, Result{}, nil
	case *runtimev1.TransferRequest_Done:
		if w.tw != nil {
			if err := w.tw.Close(); err != nil {
				return true, Result{}, sinkErr(s, err)
			}
		}
		if err := w.out.flush(); err != nil {
			return true, Result{}, sinkErr(s, err)
		}
		return true, resultOf(a.Done), nil
	case *runtimev1.TransferRequest_Refused:
		return true, Result{}, s.refuses.of(a.Refused.GetReason())
	}
	return true, Result{}, s.refuses.interrupted
}

// entry starts one entry, checked lexically and against the bound.
func (w *downloadWriter) entry(m *runtimev1.FileEntry) error {
	s := w.s
	e, ok := entryOf(m)
	if !ok {
		return s.refuses.interrupted
	}
	w.total += e.Size
	switch {
	case w.total > s.limits.MaxBytes:
		return s.refuses.of(filexfer.ReasonDownloadTooLarge)
	case w.tw != nil:
		if err := w.tw.WriteHeader(filexfer.TarHeader(e)); err != nil {
			return sinkErr(s, err)
		}
	case e.Kind != filexfer.KindFile:
		return s.refuses.of(filexfer.ReasonNotRegular)
	}
	return nil
}

// sinkErr is a failed write of the download: the client's stream (as it
// is) or a Runtime whose data broke the tar framing (interrupted).
func sinkErr(s *Service, err error) error {
	var se sendErr
	if errors.As(err, &se) {
		return se.err
	}
	return s.refuses.interrupted
}

// sendErr marks a failed send to the client.
type sendErr struct{ err error }

func (e sendErr) Error() string { return "send to client: " + e.err.Error() }

// chunker batches a download's bytes into data messages of at most
// ChunkBytes.
type chunker struct {
	sink Sink
	g    *guard
	buf  []byte
}

func (c *chunker) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := copy(c.buf[len(c.buf):cap(c.buf)], p)
		c.buf = c.buf[:len(c.buf)+k]
		p, n = p[k:], n+k
		if len(c.buf) == cap(c.buf) {
			if err := c.flush(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

func (c *chunker) flush() error {
	if len(c.buf) == 0 {
		return nil
	}
	if err := c.sink.Data(c.buf); err != nil {
		return sendErr{err}
	}
	c.g.progress()
	c.buf = c.buf[:0]
	return nil
}

func entryMessage(e filexfer.Entry) *runtimev1.TransferResponse {
	return &runtimev1.TransferResponse{Message: &runtimev1.TransferResponse_Entry{Entry: EntryProto(e)}}
}

// EntryProto is e on the wire.
func EntryProto(e filexfer.Entry) *runtimev1.FileEntry {
	m := &runtimev1.FileEntry{Name: e.Name, Kind: kinds[e.Kind], Mode: filexfer.UnixMode(e.Mode),
		Size: e.Size, LinkTarget: e.Link}
	if !e.ModTime.IsZero() {
		m.MtimeUnixNano = e.ModTime.UnixNano()
	}
	return m
}

// entryOf checks a Runtime's entry lexically: a name that leaves the
// download's root, or an unknown kind, is out of protocol.
func entryOf(m *runtimev1.FileEntry) (filexfer.Entry, bool) {
	name, err := filexfer.CleanName(m.GetName())
	if err != nil || m.GetSize() < 0 {
		return filexfer.Entry{}, false
	}
	e := filexfer.Entry{Name: name, Mode: filexfer.ModeFromUnix(m.GetMode()), Size: m.GetSize(), Link: m.GetLinkTarget()}
	for k, v := range kinds {
		if v == m.GetKind() {
			e.Kind = k
		}
	}
	if e.Kind == 0 {
		return filexfer.Entry{}, false
	}
	if e.Kind != filexfer.KindFile {
		e.Size = 0
	}
	if m.GetMtimeUnixNano() != 0 {
		e.ModTime = time.Unix(0, m.GetMtimeUnixNano())
	}
	return e, true
}

var kinds = map[filexfer.Kind]runtimev1.FileEntry_Kind{
	filexfer.KindFile:     runtimev1.FileEntry_KIND_FILE,
	filexfer.KindDir:      runtimev1.FileEntry_KIND_DIRECTORY,
	filexfer.KindSymlink:  runtimev1.FileEntry_KIND_SYMLINK,
	filexfer.KindHardlink: runtimev1.FileEntry_KIND_HARDLINK,
}

func resultOf(d *runtimev1.TransferDone) Result {
	r := Result{ModesMasked: d.GetModesMasked(), Skipped: d.GetSkipped()}
	r.Files, r.Directories, r.Symlinks, r.Hardlinks, r.Bytes = d.GetFiles(), d.GetDirectories(), d.GetSymlinks(), d.GetHardlinks(), d.GetBytes()
	return r
}
