package filexfer

import (
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"syscall"
)

// ReaderConfig configures Measure and Walk.
type ReaderConfig struct {
	// Root is the host directory that is the workspace.
	Root string
	// Path is the clean relative file or directory to read; "." is the
	// workspace.
	Path   string
	Limits Limits
}

// Measure walks cfg.Path without reading data and returns the entries and
// bytes Walk would send now: a download's summary, known before its first
// byte. It refuses too_many_entries, download_too_large, file_too_large
// and file_not_found.
func Measure(cfg ReaderConfig) (Stats, error) {
	return walk(cfg, nil)
}

// Walk calls fn for every entry under cfg.Path in lexical order, a
// directory before its contents. Names are relative to cfg.Path; a file
// Path is one entry named by its base name, and a directory Path is not
// an entry itself. r reads a regular file's bytes (nil for other kinds)
// and yields exactly e.Size bytes even when the file changes meanwhile
// (padded with zeros or cut), so a caller's framing stays valid. Symlinks
// are reported, never followed; a regular file with more than one link
// seen earlier in the walk is a KindHardlink to the first name; devices,
// FIFOs and sockets are skipped and counted. fn's error ends the walk and
// is returned as is.
func Walk(cfg ReaderConfig, fn func(e Entry, r io.Reader) error) (Stats, error) {
	if fn == nil {
		fn = func(Entry, io.Reader) error { return nil }
	}
	return walk(cfg, fn)
}

// walker is one Measure or Walk.
type walker struct {
	cfg   ReaderConfig
	root  *os.Root
	fn    func(Entry, io.Reader) error // nil: measure only
	links map[fileID]string
	stats Stats
}

type fileID struct{ dev, ino uint64 }

func walk(cfg ReaderConfig, fn func(Entry, io.Reader) error) (Stats, error) {
	p := "."
	if cfg.Path != "" && cfg.Path != "." {
		c, err := CleanName(cfg.Path)
		if err != nil {
			return Stats{}, err
		}
		p = c
	}
	root, err := os.OpenRoot(cfg.Root)
	if err != nil {
		return Stats{}, &internalError{op: "open root", err: err}
	}
	defer root.Close()
	w := &walker{cfg: cfg, root: root, fn: fn, links: map[fileID]string{}}
	info, err := root.Lstat(p)
	if notExist(err) {
		return Stats{}, refuse(ReasonNotFound, -1)
	}
	if err != nil {
		return Stats{}, fsError("stat path", err, -1)
	}
	if info.IsDir() {
		err = w.dir(p, "")
	} else {
		err = w.entry(p, path.Base(p), info)
	}
	return w.stats, err
}

// dir reports the contents of the directory full, named under prefix.
func (w *walker) dir(full, prefix string) error {
	d, err := w.root.Open(full)
	if err != nil {
		return fsError("open directory", err, -1)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fsError("read directory", err, -1)
	}
	slices.Sort(names)
	for _, n := range names {
		child := path.Join(full, n)
		name := n
		if prefix != "" {
			name = prefix + "/" + n
		}
		info, err := w.root.Lstat(child)
		if notExist(err) {
			continue // removed meanwhile
		}
		if err != nil {
			return fsError("stat entry", err, -1)
		}
		if err := w.entry(child, name, info); err != nil {
			return err
		}
		if info.IsDir() {
			if err := w.dir(child, name); err != nil {
				return err
			}
		}
	}
	return nil
}

// entry reports one entry: full is its path in the root, name its name in
// the operation.
func (w *walker) entry(full, name string, info fs.FileInfo) error {
	e := Entry{Name: name, Mode: info.Mode() & keptModeBits, ModTime: info.ModTime()}
	switch info.Mode().Type() {
	case 0:
		if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			id := fileID{dev: uint64(st.Dev), ino: st.Ino}
			if first, seen := w.links[id]; seen {
				e.Kind, e.Link = KindHardlink, first
				return w.send(e, full)
			}
			w.links[id] = name
		}
		e.Kind, e.Size = KindFile, info.Size()
	case fs.ModeDir:
		e.Kind = KindDir
	case fs.ModeSymlink:
		target, err := w.root.Readlink(full)
		if err != nil {
			return fsError("read symlink", err, -1)
		}
		e.Kind, e.Link = KindSymlink, target
	default:
		w.stats.Skipped++
		return nil
	}
	return w.send(e, full)
}

// send counts e against the limits and hands it to fn.
func (w *walker) send(e Entry, full string) error {
	idx := w.stats.Entries
	w.stats.Entries++
	l := w.cfg.Limits
	if l.MaxEntries > 0 && w.stats.Entries > l.MaxEntries {
		return refuse(ReasonTooManyEntries, idx)
	}
	if l.MaxFileBytes > 0 && e.Size > l.MaxFileBytes {
		return refuse(ReasonFileTooLarge, idx)
	}
	if l.MaxBytes > 0 && e.Size > l.MaxBytes-w.stats.Bytes {
		return refuse(ReasonDownloadTooLarge, idx)
	}
	switch e.Kind {
	case KindFile:
		w.stats.Files++
		w.stats.Bytes += e.Size
	case KindDir:
		w.stats.Dirs++
	case KindSymlink:
		w.stats.Symlinks++
	case KindHardlink:
		w.stats.Hardlinks++
	}
	if w.fn == nil {
		return nil
	}
	if e.Kind != KindFile {
		return w.fn(e, nil)
	}
	// O_NONBLOCK: a file swapped for a FIFO since the Lstat must not
	// block the walk; the fstat below skips it.
	f, err := w.root.OpenFile(full, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fsError("open file", err, idx)
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		return refuse(ReasonNotRegular, idx) // swapped since the Lstat
	}
	return w.fn(e, &exactReader{r: f, left: e.Size})
}

// exactReader yields exactly left bytes of r: zeros past r's end.
type exactReader struct {
	r    io.Reader
	left int64
	eof  bool
}

func (x *exactReader) Read(p []byte) (int, error) {
	if x.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > x.left {
		p = p[:x.left]
	}
	if !x.eof {
		n, err := x.r.Read(p)
		x.left -= int64(n)
		if err == io.EOF {
			x.eof = true
		} else if err != nil {
			return n, err
		}
		if n > 0 || !x.eof {
			return n, nil
		}
	}
	clear(p)
	x.left -= int64(len(p))
	return len(p), nil
}
