package filexfer

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Kind is what an Entry is.
type Kind uint8

// The kinds; zero is no kind.
const (
	KindFile Kind = iota + 1
	KindDir
	KindSymlink
	KindHardlink
)

// Entry is one entry of a tree.
type Entry struct {
	// Name is slash-separated and relative to the operation's path.
	Name string
	Kind Kind
	// Mode holds the permission bits and setuid, setgid and sticky only.
	Mode fs.FileMode
	// ModTime is the modification time; zero leaves the time of the
	// write.
	ModTime time.Time
	// Size is a file's length in bytes (0 for the other kinds).
	Size int64
	// Link is a symlink's target or a hard link's earlier entry.
	Link string
}

// Limits bound an operation; 0 means unbounded.
type Limits struct {
	// MaxBytes bounds the sum of the entries' sizes.
	MaxBytes int64
	// MaxFileBytes bounds one entry's size.
	MaxFileBytes int64
	// MaxEntries bounds the number of entries.
	MaxEntries int64
}

// Stats count an operation's entries.
type Stats struct {
	Files, Dirs, Symlinks, Hardlinks int64
	// Bytes is the sum of the file entries' sizes.
	Bytes int64
	// ModesMasked counts entries whose setuid, setgid or sticky bit was
	// dropped (Writer).
	ModesMasked int64
	// Skipped counts devices, FIFOs and sockets not sent (Walk).
	Skipped int64
	// Entries counts every entry begun (Writer) or reported (Walk).
	Entries int64
}

// TempPrefix starts every temporary name a Writer creates; Sweep removes
// only names that start with it.
const TempPrefix = ".berth-upload-"

// WriterConfig configures a Writer.
type WriterConfig struct {
	// Root is the host directory that is the workspace.
	Root string
	// WorkspacePath is the workspace's absolute path as agents see it,
	// for absolute symlink targets; "" means DefaultWorkspacePath.
	WorkspacePath string
	// Dest is the clean relative destination directory ("." allowed). It
	// is created when missing and must not be a file.
	Dest string
	// OpID names the temporary files and the journal: letters, digits,
	// '-' and '_', at most 64 bytes.
	OpID string
	// JournalDir, when set, is a host directory outside Root that holds
	// one journal file per OpID listing the directories (relative to
	// Root) that hold its temporary names, each appended and synced before
	// the first temporary name in it is created: one sync per directory,
	// not per file.
	JournalDir string
	// NoOverwrite refuses an entry whose name exists (file_exists); a
	// directory entry over an existing directory is still applied.
	NoOverwrite bool
	Limits      Limits
}

// Writer applies an upload's entries under a workspace root, one at a
// time: Begin each entry, Write a file's bytes, Commit at the end, and
// Close always. A refusal is final: every later call returns it. A Writer
// is not safe for concurrent use.
type Writer struct {
	cfg     WriterConfig
	root    *os.Root
	dest    string
	journal *os.File

	next   int64           // index of the next entry
	names  map[string]bool // cleaned names seen
	files  map[string]bool // cleaned names of file entries in place
	dirs   []pendingDir    // modes and times applied at Commit
	cur    *pendingFile    // the file entry being written
	tmpSeq int64
	total  int64
	// journaled are the directories the journal lists.
	journaled map[string]bool
	stats     Stats
	err       error // sticky: the first failure
	closed    bool
}

// pendingFile is a file entry whose bytes are arriving.
type pendingFile struct {
	f       *os.File
	tmp     string // relative to the root
	full    string
	name    string
	e       Entry
	idx     int64
	written int64
}

// pendingDir is a directory whose mode and time wait for Commit: a
// read-only mode would stop the entries beneath it, and each entry
// beneath changes its time.
type pendingDir struct {
	full    string
	mode    fs.FileMode
	modTime time.Time
}

// NewWriter opens cfg.Root and readies the destination.
func NewWriter(cfg WriterConfig) (*Writer, error) {
	if !validOpID(cfg.OpID) {
		return nil, errors.New("filexfer: invalid operation id")
	}
	dest := "."
	if cfg.Dest != "" && cfg.Dest != "." {
		d, err := CleanName(cfg.Dest)
		if err != nil {
			return nil, err
		}
		dest = d
	}
	if cfg.WorkspacePath == "" {
		cfg.WorkspacePath = DefaultWorkspacePath
	}
	root, err := os.OpenRoot(cfg.Root)
	if err != nil {
		return nil, &internalError{op: "open root", err: err}
	}
	w := &Writer{cfg: cfg, root: root, dest: dest, names: map[string]bool{}, files: map[string]bool{}, journaled: map[string]bool{}}
	if err := w.openDest(); err != nil {
		root.Close()
		return nil, err
	}
	if cfg.JournalDir != "" {
		j, err := os.OpenFile(filepath.Join(cfg.JournalDir, cfg.OpID), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			root.Close()
			return nil, &internalError{op: "open journal", err: err}
		}
		w.journal = j
	}
	return w, nil
}

func (w *Writer) openDest() error {
	if w.dest == "." {
		return nil
	}
	if err := w.root.MkdirAll(w.dest, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return refuse(ReasonTypeConflict, -1)
		}
		return fsError("create destination", err, -1)
	}
	info, err := w.root.Stat(w.dest)
	if err != nil {
		return fsError("stat destination", err, -1)
	}
	if !info.IsDir() {
		return refuse(ReasonTypeConflict, -1)
	}
	return nil
}

func validOpID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range []byte(id) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// Stats returns the counts so far.
func (w *Writer) Stats() Stats { return w.stats }

// fail records the first failure and returns it.
func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return w.err
}

// Begin ends the previous file entry (it must be complete) and starts e:
// it checks e lexically, against the filesystem and against the limits,
// and applies a directory, symlink or hard link at once; for a file it
// creates the temporary file that Write fills.
func (w *Writer) Begin(e Entry) error {
	if err := w.usable(); err != nil {
		return err
	}
	if err := w.endFile(); err != nil {
		return w.fail(err)
	}
	idx := w.next
	w.next++
	w.stats.Entries++
	if err := w.begin(e, idx); err != nil {
		return w.fail(withEntry(err, idx))
	}
	return nil
}

func (w *Writer) usable() error {
	if w.closed {
		return errors.New("filexfer: writer closed")
	}
	return w.err
}

func (w *Writer) begin(e Entry, idx int64) error {
	name, err := w.checkEntry(e, idx)
	if err != nil {
		return err
	}
	full := joinDest(w.dest, name)
	linkTo, err := w.checkLink(e, full, idx)
	if err != nil {
		return err
	}
	existing, err := w.prepareParent(full, idx)
	if err != nil {
		return err
	}
	mode := e.Mode & keptModeBits
	if mode&^fs.ModePerm != 0 && (e.Kind == KindFile || e.Kind == KindDir) {
		w.stats.ModesMasked++
	}
	mode &= fs.ModePerm

	if e.Kind == KindDir {
		return w.beginDir(e, full, mode, existing, idx)
	}
	if existing != nil {
		if existing.IsDir() {
			return refuse(ReasonTypeConflict, idx)
		}
		if w.cfg.NoOverwrite {
			return refuse(ReasonFileExists, idx)
		}
	}
	tmp, err := w.tempName(path.Dir(full), idx)
	if err != nil {
		return err
	}
	switch e.Kind {
	case KindSymlink:
		if err := w.root.Symlink(e.Link, tmp); err != nil {
			return fsError("create symlink", err, idx)
		}
		if err := w.place(tmp, full, idx); err != nil {
			return err
		}
		w.stats.Symlinks++
		return nil
	case KindHardlink:
		if err := w.root.Link(linkTo, tmp); err != nil {
			return fsError("create hard link", err, idx)
		}
		if err := w.place(tmp, full, idx); err != nil {
			return err
		}
		w.stats.Hardlinks++
		return nil
	}
	if e.Size > 0 {
		if err := w.checkFree(e.Size, idx); err != nil {
			return err
		}
	}
	f, err := w.root.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fsError("create temporary file", err, idx)
	}
	e.Mode = mode
	w.total += e.Size
	w.cur = &pendingFile{f: f, tmp: tmp, full: full, name: name, e: e, idx: idx}
	return nil
}

// checkEntry applies the lexical rules and the limits to e and returns
// its clean name.
func (w *Writer) checkEntry(e Entry, idx int64) (string, error) {
	if w.cfg.Limits.MaxEntries > 0 && w.next > w.cfg.Limits.MaxEntries {
		return "", refuse(ReasonTooManyEntries, idx)
	}
	name, err := CleanName(e.Name)
	if err != nil {
		return "", err
	}
	switch e.Kind {
	case KindFile:
		if e.Size < 0 {
			return "", refuse(ReasonInvalidArchive, idx)
		}
		if w.cfg.Limits.MaxFileBytes > 0 && e.Size > w.cfg.Limits.MaxFileBytes {
			return "", refuse(ReasonFileTooLarge, idx)
		}
		if w.cfg.Limits.MaxBytes > 0 && e.Size > w.cfg.Limits.MaxBytes-w.total {
			return "", refuse(ReasonUploadTooLarge, idx)
		}
	case KindDir, KindSymlink, KindHardlink:
		if e.Size != 0 {
			return "", refuse(ReasonInvalidArchive, idx)
		}
	default:
		return "", refuse(ReasonInvalidArchive, idx)
	}
	if w.names[name] {
		return "", refuse(ReasonDuplicateEntry, idx)
	}
	w.names[name] = true
	return name, nil
}

// checkLink checks a symlink's target and a hard link's earlier entry,
// and returns the path a hard link links to.
func (w *Writer) checkLink(e Entry, full string, idx int64) (string, error) {
	switch e.Kind {
	case KindSymlink:
		return "", checkSymlink(w.cfg.WorkspacePath, full, e.Link)
	case KindHardlink:
		t, err := CleanName(e.Link)
		if err != nil || !w.files[t] {
			return "", refuse(ReasonHardlinkOutside, idx)
		}
		return joinDest(w.dest, t), nil
	}
	return "", nil
}

// prepareParent creates the parents of full and returns what full holds
// now (nil when nothing).
func (w *Writer) prepareParent(full string, idx int64) (fs.FileInfo, error) {
	if parent := path.Dir(full); parent != "." {
		if err := w.root.MkdirAll(parent, 0o755); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return nil, refuse(ReasonTypeConflict, idx)
			}
			return nil, fsError("create parent", err, idx)
		}
	}
	existing, err := w.root.Lstat(full)
	switch {
	case notExist(err):
		return nil, nil
	case err != nil:
		return nil, fsError("stat entry", err, idx)
	}
	return existing, nil
}

// beginDir applies a directory entry; its mode and time wait for Commit.
func (w *Writer) beginDir(e Entry, full string, mode fs.FileMode, existing fs.FileInfo, idx int64) error {
	if existing != nil && !existing.IsDir() {
		return refuse(ReasonTypeConflict, idx)
	}
	if existing == nil {
		if err := w.root.Mkdir(full, 0o755); err != nil {
			return fsError("create directory", err, idx)
		}
	}
	w.dirs = append(w.dirs, pendingDir{full: full, mode: mode, modTime: e.ModTime})
	w.stats.Dirs++
	return nil
}

// tempName returns the next temporary name in dir, whose directory the
// journal lists first.
func (w *Writer) tempName(dir string, idx int64) (string, error) {
	w.tmpSeq++
	tmp := path.Join(dir, tempPrefix(w.cfg.OpID)+fmt.Sprint(w.tmpSeq))
	if w.journal != nil && !w.journaled[dir] {
		if _, err := w.journal.WriteString(dir + "\n"); err != nil {
			return "", fsError("write journal", err, idx)
		}
		if err := w.journal.Sync(); err != nil {
			return "", fsError("sync journal", err, idx)
		}
		w.journaled[dir] = true
	}
	return tmp, nil
}

// tempPrefix starts every temporary name of operation op.
func tempPrefix(op string) string { return TempPrefix + op + "-" }

// place renames tmp onto full, removing tmp when that fails.
func (w *Writer) place(tmp, full string, idx int64) error {
	if err := w.root.Rename(tmp, full); err != nil {
		_ = w.root.Remove(tmp)
		if errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, fs.ErrExist) {
			return refuse(ReasonTypeConflict, idx)
		}
		return fsError("rename into place", err, idx)
	}
	return nil
}

// checkFree refuses a file larger than the filesystem's free space.
func (w *Writer) checkFree(size, idx int64) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(w.cfg.Root, &st); err != nil {
		return nil // no answer is no refusal: the write finds out
	}
	if free := st.Bavail * uint64(st.Bsize); free < uint64(size) {
		return refuse(ReasonWorkspaceFull, idx)
	}
	return nil
}

// Write appends p to the current file entry; bytes beyond its size, or
// bytes outside a file entry, are invalid_archive.
func (w *Writer) Write(p []byte) (int, error) {
	if err := w.usable(); err != nil {
		return 0, err
	}
	c := w.cur
	if c == nil {
		return 0, w.fail(refuse(ReasonInvalidArchive, w.next-1))
	}
	if int64(len(p)) > c.e.Size-c.written {
		return 0, w.fail(refuse(ReasonInvalidArchive, c.idx))
	}
	n, err := c.f.Write(p)
	c.written += int64(n)
	if err != nil {
		return n, w.fail(fsError("write file", err, c.idx))
	}
	return n, nil
}

// endFile puts the current file entry in place: it must have all its
// bytes; its mode and time are set on the temporary file, which is then
// renamed onto its name.
func (w *Writer) endFile() error {
	c := w.cur
	if c == nil {
		return nil
	}
	if c.written != c.e.Size {
		return refuse(ReasonInvalidArchive, c.idx)
	}
	w.cur = nil
	err := c.f.Chmod(c.e.Mode)
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	if err == nil && !c.e.ModTime.IsZero() {
		err = w.root.Chtimes(c.tmp, c.e.ModTime, c.e.ModTime)
	}
	if err != nil {
		_ = w.root.Remove(c.tmp)
		return fsError("finish file", err, c.idx)
	}
	if err := w.place(c.tmp, c.full, c.idx); err != nil {
		return err
	}
	w.files[c.name] = true
	w.stats.Files++
	w.stats.Bytes += c.e.Size
	return nil
}

// Commit ends the last entry (a file short of its size is
// invalid_archive) and applies the directories' modes and times, deepest
// first.
func (w *Writer) Commit() error {
	if err := w.usable(); err != nil {
		return err
	}
	if err := w.endFile(); err != nil {
		return w.fail(err)
	}
	for i := len(w.dirs) - 1; i >= 0; i-- {
		d := w.dirs[i]
		if err := w.root.Chmod(d.full, d.mode); err != nil {
			return w.fail(fsError("set directory mode", err, -1))
		}
		if !d.modTime.IsZero() {
			if err := w.root.Chtimes(d.full, d.modTime, d.modTime); err != nil {
				return w.fail(fsError("set directory time", err, -1))
			}
		}
	}
	w.dirs = nil
	return nil
}

// Close removes an unfinished temporary file and the journal and releases
// the root. It is idempotent and must always be called.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	var errs []error
	if c := w.cur; c != nil {
		w.cur = nil
		_ = c.f.Close()
		if err := w.root.Remove(c.tmp); err != nil && !notExist(err) {
			errs = append(errs, &internalError{op: "remove temporary file", err: err})
		}
	}
	if w.journal != nil {
		_ = w.journal.Close()
		if err := os.Remove(w.journal.Name()); err != nil && !notExist(err) {
			errs = append(errs, &internalError{op: "remove journal", err: err})
		}
	}
	_ = w.root.Close()
	return errors.Join(errs...)
}

// Sweep removes, for every journal in journalDir, the temporary files of
// its operation (names starting with TempPrefix, the journal's name and
// '-') in each directory it lists (relative to root, read and removed
// through an os.Root), then the journals. A process killed mid-upload
// leaves no temporary file behind once the next one sweeps. A missing
// journalDir has nothing to sweep.
func Sweep(root, journalDir string) (removed int, err error) {
	journals, err := os.ReadDir(journalDir)
	if notExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, &internalError{op: "read journal directory", err: err}
	}
	if len(journals) == 0 {
		return 0, nil
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return 0, &internalError{op: "open root", err: err}
	}
	defer r.Close()
	var errs []error
	for _, j := range journals {
		if !j.Type().IsRegular() {
			continue
		}
		jp := filepath.Join(journalDir, j.Name())
		n, err := sweepJournal(r, jp)
		removed += n
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.Remove(jp); err != nil && !notExist(err) {
			errs = append(errs, &internalError{op: "remove journal", err: err})
		}
	}
	return removed, errors.Join(errs...)
}

func sweepJournal(r *os.Root, journal string) (int, error) {
	f, err := os.Open(journal)
	if err != nil {
		return 0, &internalError{op: "open journal", err: err}
	}
	defer f.Close()
	prefix := tempPrefix(filepath.Base(journal))
	removed := 0
	var errs []error
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), MaxPathBytes+2)
	for sc.Scan() {
		dir := sc.Text()
		if dir != "." {
			if dir, err = CleanName(dir); err != nil {
				continue // not a directory a Writer lists: never touch it
			}
		}
		d, err := r.Open(dir)
		if err != nil {
			continue // gone, or not reachable inside the root
		}
		entries, err := d.ReadDir(-1)
		d.Close()
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), prefix) {
				continue
			}
			switch err := r.Remove(path.Join(dir, e.Name())); {
			case err == nil:
				removed++
			case notExist(err), isEscape(err):
			default:
				errs = append(errs, &internalError{op: "remove temporary file", err: err})
			}
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, &internalError{op: "read journal", err: err})
	}
	return removed, errors.Join(errs...)
}
