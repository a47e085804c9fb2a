package main

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/runtimebootstrap/filexfer"

	"berth.dev/core/cmd/berthctl/internal/adminclient"
)

// chunkSize is the most data one FileService message carries.
const chunkSize = 1 << 20

// progressEvery throttles the transfer's progress line.
const progressEvery = 100 * time.Millisecond

// cpFlags are cp's flags.
type cpFlags struct {
	noOverwrite bool
	raw         bool
	requestID   string
}

func (a *app) cpCmd() *cobra.Command {
	var f cpFlags
	c := a.command("cp SRC DST", "Copy files between this machine and a Session's /workspace (FileService)", exactArgs("SRC", "DST"),
		func(cmd *cobra.Command, args []string) error { return a.cp(cmd, args[0], args[1], f) })
	c.Long = `cp copies between this machine and a Session's /workspace: exactly one of
SRC and DST is sessions/<id>:<path>, the path relative to /workspace or
absolute under it (empty: the workspace itself). A local path that starts
with "sessions/" and holds a ":" is written ./sessions/... .

Upload (local SRC):
  - A directory is sent as a tar made while it is read: the tree lands at
    <path>/<its name>, as cp -r puts it (DIR/. sends its contents into
    <path>). Symlinks are sent as links and hard links as links; devices,
    FIFOs and sockets are skipped.
  - A file is written at <path>, or at <path>/<its name> when <path> ends
    with "/" or is empty, with its permission bits.
  - "-" reads a tar from stdin and extracts it under <path>.
  Prints what was written: files, directories, symlinks, hard links, bytes.

Download (remote SRC):
  - The tree at <path> (a directory's contents, or a file by its name) is
    extracted into the local directory DST, created when missing, with the
    rules the Runtime applies: no entry and no symlink leaves DST (an
    absolute symlink is kept only when it points inside DST), and a file
    reaches its name by an atomic rename.
  - --raw reads one file's bytes into the local file DST, or into DST/<its
    name> when DST is a directory or ends with "/".
  - "-" writes the tar (or with --raw the bytes) to stdout; nothing is
    extracted.

When stderr is a terminal a progress line shows the bytes copied, the
total, the percentage and the rate. A refusal prints its fixed reason
(path_escapes_workspace, file_exists, ...) and exits 1.`
	c.Example = `  berthctl cp ./proj sessions/0b6e...:src        # the tree at /workspace/src/proj
  berthctl cp notes.txt sessions/0b6e...:docs/     # /workspace/docs/notes.txt
  berthctl cp sessions/0b6e...:src/proj ./back     # proj's contents into ./back
  berthctl cp --raw sessions/0b6e...:out.log .     # ./out.log
  tar -C dir -c . | berthctl cp - sessions/0b6e...:dir`
	fs := c.Flags()
	fs.BoolVar(&f.noOverwrite, "no-overwrite", false, "refuse an entry whose name exists (file_exists)")
	fs.BoolVar(&f.raw, "raw", false, "download one file's bytes instead of a tar")
	fs.StringVar(&f.requestID, "request-id", "", "UUID naming an upload in the audit trail (default: a new one; a download is named by its call)")
	return c
}

// remote is the Session side of cp: sessions/<id>:<path>.
type remote struct {
	session, path string
}

func (r remote) String() string { return r.session + ":" + r.path }

// parseRemote reads arg as sessions/<id>:<path>; ok is false for a local
// path.
func parseRemote(arg string) (r remote, ok bool) {
	if !strings.HasPrefix(arg, "sessions/") {
		return remote{}, false
	}
	session, path, ok := strings.Cut(arg, ":")
	return remote{session: session, path: path}, ok
}

func (a *app) cp(cmd *cobra.Command, src, dst string, f cpFlags) error {
	from, srcRemote := parseRemote(src)
	to, dstRemote := parseRemote(dst)
	if srcRemote == dstRemote {
		return usagef(cmd, "cp copies between this machine and a Session: exactly one of SRC and DST is sessions/<id>:<path>")
	}
	if f.requestID == "" {
		f.requestID = uuid.NewString()
	}
	if dstRemote {
		if f.raw {
			return usagef(cmd, "--raw is for downloads: a file is always uploaded raw and a directory as a tar")
		}
		if src == "-" && isTerminal(a.stdin) {
			return usagef(cmd, "cp - reads a tar from stdin, which is a terminal: pipe one in")
		}
		return a.cpUpload(src, to, f)
	}
	return a.cpDownload(from, dst, f)
}

// cpUpload sends src (a directory, a file, or "-" for a tar on stdin) to
// the Session and prints what was written.
func (a *app) cpUpload(src string, to remote, f cpFlags) error {
	h := &adminv1.UploadHeader{Name: to.session, RequestId: f.requestID, Path: to.path, NoOverwrite: f.noOverwrite,
		Format: adminv1.FileFormat_FILE_FORMAT_TAR}
	p := a.transferProgress(-1)
	defer p.end()
	var (
		resp *adminv1.UploadFilesResponse
		err  error
	)
	if src == "-" {
		resp, err = a.upload(h, &countingReader{r: a.stdin, n: &p.done}, p)
	} else {
		info, serr := os.Stat(src)
		switch {
		case serr != nil:
			return adminclient.Errorf("local_file_unreadable", "%s: %v", src, unwrapPath(serr))
		case info.IsDir():
			resp, err = a.uploadDir(h, src, p)
		case info.Mode().IsRegular():
			resp, err = a.uploadFile(h, src, info, p)
		default:
			return adminclient.Errorf(filexfer.ReasonFileTypeRefused, "%s is not a regular file or directory: only those are copied", src)
		}
	}
	if err != nil {
		return err
	}
	p.end()
	return a.show(resp, func(w io.Writer) {
		fmt.Fprintf(w, "copied to %s: %d files, %d directories, %d symlinks, %d hard links, %d bytes\n", to,
			resp.GetFiles(), resp.GetDirectories(), resp.GetSymlinks(), resp.GetHardlinks(), resp.GetBytes())
	})
}

// uploadFile sends one regular file as FILE_FORMAT_RAW with its size and
// permission bits.
func (a *app) uploadFile(h *adminv1.UploadHeader, src string, info fs.FileInfo, p *transfer) (*adminv1.UploadFilesResponse, error) {
	if h.Path == "" || strings.HasSuffix(h.Path, "/") {
		h.Path += filepath.Base(src)
	}
	h.Format, h.Size, h.Mode = adminv1.FileFormat_FILE_FORMAT_RAW, info.Size(), filexfer.UnixMode(info.Mode().Perm())
	file, err := os.Open(src)
	if err != nil {
		return nil, adminclient.Errorf("local_file_unreadable", "%s: %v", src, unwrapPath(err))
	}
	defer file.Close()
	p.total = info.Size()
	// Exactly Size bytes: a file that grew meanwhile is cut, one that
	// shrank is refused by the Runtime (invalid_archive).
	return a.upload(h, &countingReader{r: io.LimitReader(file, info.Size()), n: &p.done}, p)
}

// uploadDir sends the tree at dir as a tar written while it is walked
// (filexfer.Walk, rooted at dir so no link leads the walk out of it),
// each name under dir's own name unless dir is "." or ends in "/.".
func (a *app) uploadDir(h *adminv1.UploadHeader, dir string, p *transfer) (*adminv1.UploadFilesResponse, error) {
	prefix := filepath.Base(absPath(dir))
	if dir == "." || strings.HasSuffix(dir, "/.") || prefix == "/" {
		prefix = ""
	}
	cfg := filexfer.ReaderConfig{Root: dir, Path: "."}
	if p.on {
		stats, err := filexfer.Measure(cfg)
		if err != nil {
			return nil, localRefusal(err, dir)
		}
		p.total = stats.Bytes
	}
	pr, pw := io.Pipe()
	walked := make(chan filexfer.Stats, 1)
	go func() {
		stats, err := writeTar(pw, cfg, dir, prefix, &p.done)
		pw.CloseWithError(err)
		walked <- stats
	}()
	resp, err := a.upload(h, pr, p)
	pr.Close() // ends a walk the upload stopped reading
	if stats := <-walked; err == nil && stats.Skipped > 0 {
		fmt.Fprintf(a.stderr, "berthctl: skipped %d devices, FIFOs or sockets\n", stats.Skipped)
	}
	return resp, err
}

// writeTar writes the tree of cfg to w as a PAX tar, names under prefix
// (with an entry for prefix itself, from dir's own mode and time).
// File bytes read add to done.
func writeTar(w io.Writer, cfg filexfer.ReaderConfig, dir, prefix string, done *atomic.Int64) (filexfer.Stats, error) {
	tw := tar.NewWriter(w)
	under := func(name string) string {
		if prefix == "" {
			return name
		}
		return prefix + "/" + name
	}
	if prefix != "" {
		info, err := os.Stat(dir)
		if err != nil {
			return filexfer.Stats{}, err
		}
		if err := tw.WriteHeader(filexfer.TarHeader(filexfer.Entry{Name: prefix, Kind: filexfer.KindDir, Mode: info.Mode(), ModTime: info.ModTime()})); err != nil {
			return filexfer.Stats{}, err
		}
	}
	stats, err := filexfer.Walk(cfg, func(e filexfer.Entry, r io.Reader) error {
		e.Name = under(e.Name)
		if e.Kind == filexfer.KindHardlink {
			e.Link = under(e.Link)
		}
		if err := tw.WriteHeader(filexfer.TarHeader(e)); err != nil {
			return err
		}
		if r == nil {
			return nil
		}
		_, err := io.Copy(tw, &countingReader{r: r, n: done})
		return err
	})
	if err != nil {
		return stats, localRefusal(err, dir)
	}
	return stats, tw.Close()
}

// upload is one UploadFiles call: h, then body in messages of at most
// chunkSize. A local read error cancels the call and is returned.
func (a *app) upload(h *adminv1.UploadHeader, body io.Reader, p *transfer) (*adminv1.UploadFilesResponse, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := a.files.UploadFiles(ctx)
	if err != nil {
		return nil, adminclient.Decode(err)
	}
	closeAndRecv := func() (*adminv1.UploadFilesResponse, error) {
		resp, err := st.CloseAndRecv()
		return resp, adminclient.Decode(err)
	}
	if err := st.Send(&adminv1.UploadFilesRequest{Message: &adminv1.UploadFilesRequest_Header{Header: h}}); err != nil {
		return closeAndRecv() // the call's own error
	}
	for {
		// A new buffer each time: gRPC may hold a sent message.
		buf := make([]byte, chunkSize)
		n, rerr := io.ReadFull(body, buf)
		if n > 0 {
			if err := st.Send(&adminv1.UploadFilesRequest{Message: &adminv1.UploadFilesRequest_Data{Data: buf[:n]}}); err != nil {
				return closeAndRecv()
			}
			p.update()
		}
		switch {
		case errors.Is(rerr, io.EOF), errors.Is(rerr, io.ErrUnexpectedEOF):
			return closeAndRecv()
		case rerr != nil:
			return nil, rerr
		}
	}
}

// cpDownload reads from the Session into dst: extracted (a tar), a file
// (--raw), or stdout ("-").
func (a *app) cpDownload(from remote, dst string, f cpFlags) error {
	req := &adminv1.DownloadFilesRequest{Name: from.session, Path: from.path, Format: adminv1.FileFormat_FILE_FORMAT_TAR}
	if f.raw {
		req.Format = adminv1.FileFormat_FILE_FORMAT_RAW
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := a.files.DownloadFiles(ctx, req)
	if err != nil {
		return adminclient.Decode(err)
	}
	first, err := st.Recv()
	if err != nil {
		return adminclient.Decode(err)
	}
	header := first.GetHeader()
	if header == nil {
		return adminclient.Errorf("invalid_download", "the download did not start with its header")
	}
	p := a.transferProgress(header.GetBytes())
	defer p.end()
	body := &downloadReader{st: st, p: p, counted: dst == "-" || f.raw}

	var (
		written filexfer.Stats
		where   = dst
	)
	switch {
	case dst == "-":
		_, err = io.Copy(a.stdout, body)
	case f.raw:
		where, written, err = extractRaw(body, dst, from.path, header.GetBytes(), f)
	default:
		written, err = extract(body, dst, f, &p.done)
	}
	if err != nil {
		return err
	}
	p.end()
	if dst == "-" {
		return nil
	}
	return a.show(header, func(w io.Writer) {
		fmt.Fprintf(w, "copied to %s: %d files, %d directories, %d symlinks, %d hard links, %d bytes\n", where,
			written.Files, written.Dirs, written.Symlinks, written.Hardlinks, written.Bytes)
	})
}

// extract applies the tar body under the local directory dir with a
// filexfer.Writer rooted there: the Runtime's confinement on this side,
// since the archive comes from a sandbox. File bytes written add to done.
func extract(body io.Reader, dir string, f cpFlags, done *atomic.Int64) (filexfer.Stats, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return filexfer.Stats{}, adminclient.Errorf("local_file_unwritable", "%s: %v", dir, unwrapPath(err))
	}
	w, err := filexfer.NewWriter(filexfer.WriterConfig{Root: dir, WorkspacePath: absPath(dir), Dest: ".", OpID: f.requestID, NoOverwrite: f.noOverwrite})
	if err != nil {
		return filexfer.Stats{}, localRefusal(err, dir)
	}
	defer w.Close()
	tr := tar.NewReader(body)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return w.Stats(), extractError(err, dir)
		}
		e, err := filexfer.FromTarHeader(h)
		if err == nil {
			err = w.Begin(e)
		}
		if err == nil && e.Kind == filexfer.KindFile {
			_, err = io.Copy(&countingWriter{w: w, n: done}, tr)
		}
		if err != nil {
			return w.Stats(), extractError(err, dir)
		}
	}
	if err := w.Commit(); err != nil {
		return w.Stats(), localRefusal(err, dir)
	}
	return w.Stats(), nil
}

// extractRaw writes the raw body (size bytes) at dst, or at dst/<base of
// remotePath> when dst is a directory or ends with "/", through a
// filexfer.Writer: the file appears whole by a rename or not at all.
func extractRaw(body io.Reader, dst, remotePath string, size int64, f cpFlags) (string, filexfer.Stats, error) {
	target := dst
	if info, err := os.Stat(dst); strings.HasSuffix(dst, "/") || err == nil && info.IsDir() {
		target = filepath.Join(dst, filepath.Base(remotePath))
	}
	dir, base := filepath.Split(target)
	if dir == "" {
		dir = "."
	}
	stats, err := extract(rawAsTar(body, base, size), dir, f, nil)
	return target, stats, err
}

// rawAsTar frames a raw body as a one-file tar, so extract applies it.
func rawAsTar(body io.Reader, name string, size int64) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := tw.WriteHeader(filexfer.TarHeader(filexfer.Entry{Name: name, Kind: filexfer.KindFile, Mode: 0o644, Size: size}))
		if err == nil {
			_, err = io.Copy(tw, body)
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr
}

// downloadReader reads a download's data messages; counted adds them to
// the progress (when no extraction counts file bytes instead).
type downloadReader struct {
	st interface {
		Recv() (*adminv1.DownloadFilesResponse, error)
	}
	p       *transfer
	counted bool
	buf     []byte
}

func (r *downloadReader) Read(b []byte) (int, error) {
	for len(r.buf) == 0 {
		m, err := r.st.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return 0, io.EOF
			}
			return 0, adminclient.Decode(err)
		}
		r.buf = m.GetData()
	}
	n := copy(b, r.buf)
	r.buf = r.buf[n:]
	if r.counted {
		r.p.done.Add(int64(n))
	}
	r.p.update()
	return n, nil
}

// extractError keeps the admin API's reason (the download failed) and
// filexfer's (an entry refused here), names a malformed archive
// invalid_archive, and wraps anything else with the local directory.
func extractError(err error, dir string) error {
	switch {
	case adminclient.Reason(err) != "":
		return err
	case errors.Is(err, tar.ErrHeader), errors.Is(err, tar.ErrFieldTooLong), errors.Is(err, io.ErrUnexpectedEOF):
		return adminclient.Errorf(filexfer.ReasonInvalidArchive, "the download is not a valid tar archive: %v", err)
	}
	return localRefusal(err, dir)
}

// localRefusal turns filexfer's refusal on this machine into berthctl's
// error with the same fixed reason; an admin API error passes as is.
func localRefusal(err error, where string) error {
	if adminclient.Reason(err) != "" {
		return err
	}
	reason, ok := filexfer.ReasonOf(err)
	if !ok {
		return fmt.Errorf("%s: %w", where, err)
	}
	var r *filexfer.Refusal
	errors.As(err, &r)
	return adminclient.Errorf(reason, "entry %d refused on this machine in %s (berthctl applies the workspace's rules to local files)", r.Entry, where)
}

// unwrapPath drops the path an *fs.PathError repeats.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// countingReader adds what it reads to n.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	k, err := c.r.Read(b)
	c.n.Add(int64(k))
	return k, err
}

// countingWriter adds what it writes to n, when n is set.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	k, err := c.w.Write(b)
	if c.n != nil {
		c.n.Add(int64(k))
	}
	return k, err
}

// transfer is cp's progress line on stderr, only when stderr is a
// terminal: bytes done of total (total < 0: unknown), the percentage and
// the rate, redrawn at most every progressEvery. done is added to from
// any goroutine; mu orders the draws (a raw download reads in the
// goroutine that frames it as a tar).
type transfer struct {
	w     io.Writer
	on    bool
	total int64
	done  atomic.Int64
	start time.Time

	mu    sync.Mutex
	last  time.Time
	shown bool
}

func (a *app) transferProgress(total int64) *transfer {
	return &transfer{w: a.stderr, on: isTerminal(a.stderr), total: total, start: time.Now()}
}

// update redraws the line when the last draw is old enough.
func (p *transfer) update() {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.last) < progressEvery {
		return
	}
	p.last = time.Now()
	done := p.done.Load()
	rate := float64(done) / max(time.Since(p.start).Seconds(), 0.001)
	line := human(done)
	if p.total >= 0 {
		done = min(done, p.total)
		pct := 100.0
		if p.total > 0 {
			pct = float64(done) * 100 / float64(p.total)
		}
		line = fmt.Sprintf("%s / %s (%.0f%%)", human(done), human(p.total), pct)
	}
	fmt.Fprintf(p.w, "\r\033[K%s %s/s", line, human(int64(rate)))
	p.shown = true
}

// end clears the line; it may be called again.
func (p *transfer) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}

// human is a byte count in its largest binary unit ("1.5Mi", "512B").
func human(n int64) string {
	for _, u := range []struct {
		suffix string
		bytes  int64
	}{{"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if n >= u.bytes {
			return fmt.Sprintf("%.1f%s", float64(n)/float64(u.bytes), u.suffix)
		}
	}
	return fmt.Sprintf("%dB", n)
}
