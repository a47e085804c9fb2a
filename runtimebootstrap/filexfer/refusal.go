package filexfer

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// The fixed refusal reasons. They are the wire's (TransferRefused.reason)
// and the admin API's, so they never change spelling.
const (
	// ReasonPathAbsolute: an absolute entry name, or an absolute path that
	// is not under the workspace.
	ReasonPathAbsolute = "path_absolute"
	// ReasonPathEscapes: a ".." that leaves the destination or the
	// workspace, or a symlink on the way that points out of it.
	ReasonPathEscapes = "path_escapes_workspace"
	// ReasonSymlinkEscapes: a symlink entry whose target leaves the
	// workspace.
	ReasonSymlinkEscapes = "symlink_escapes_workspace"
	// ReasonHardlinkOutside: a hard link to a name that is not an earlier
	// regular-file entry of the same operation.
	ReasonHardlinkOutside = "hardlink_outside_archive"
	// ReasonFileTypeRefused: a device, FIFO, socket or unknown type.
	ReasonFileTypeRefused = "file_type_refused"
	// ReasonDuplicateEntry: the same cleaned name twice in one operation.
	ReasonDuplicateEntry = "duplicate_entry"
	// ReasonTypeConflict: a file over a directory, a directory over a
	// file or symlink, or an entry under a name that is a file.
	ReasonTypeConflict = "type_conflict"
	// ReasonFileExists: the operation forbids overwriting and the name
	// exists.
	ReasonFileExists = "file_exists"
	// ReasonPathTooLong: over MaxPathBytes, a component over
	// MaxComponentBytes, a NUL or invalid UTF-8.
	ReasonPathTooLong = "path_too_long"
	// ReasonInvalidArchive: a malformed entry or entry sequence.
	ReasonInvalidArchive = "invalid_archive"
	// ReasonFileTooLarge: one entry's logical size over
	// Limits.MaxFileBytes.
	ReasonFileTooLarge = "file_too_large"
	// ReasonUploadTooLarge: the entries' sizes add up to more than
	// Limits.MaxBytes (Writer).
	ReasonUploadTooLarge = "upload_too_large"
	// ReasonDownloadTooLarge: the same bound for Measure and Walk.
	ReasonDownloadTooLarge = "download_too_large"
	// ReasonTooManyEntries: more entries than Limits.MaxEntries.
	ReasonTooManyEntries = "too_many_entries"
	// ReasonWorkspaceFull: the filesystem ran out of space or quota, or
	// has less free space than the next file's size.
	ReasonWorkspaceFull = "workspace_full"
	// ReasonNotRegular: a path that must be a regular file is not.
	ReasonNotRegular = "not_a_regular_file"
	// ReasonNotFound: the path to read does not exist.
	ReasonNotFound = "file_not_found"
)

// Bounds of a name (ReasonPathTooLong): Linux's PATH_MAX and NAME_MAX.
const (
	MaxPathBytes      = 4096
	MaxComponentBytes = 255
)

// Refusal ends an operation with a fixed reason. Entry is the 0-based
// index of the entry refused, or -1 when no entry is to blame.
type Refusal struct {
	Reason string
	Entry  int64
}

// Error never names a path or carries OS text: a Refusal may be logged and
// sent as is.
func (r *Refusal) Error() string { return "file refused: " + r.Reason }

// ReasonOf returns err's refusal reason when err is (or wraps) a *Refusal.
func ReasonOf(err error) (reason string, ok bool) {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Reason, true
	}
	return "", false
}

func refuse(reason string, entry int64) *Refusal { return &Refusal{Reason: reason, Entry: entry} }

// withEntry sets the entry index of a refusal made without one.
func withEntry(err error, entry int64) error {
	var r *Refusal
	if errors.As(err, &r) && r.Entry < 0 {
		return &Refusal{Reason: r.Reason, Entry: entry}
	}
	return err
}

// isEscape reports whether err is os.Root's "path escapes from parent".
// The os package does not export that error, so it is recognised by the
// innermost error's text, which is fixed in the standard library.
func isEscape(err error) bool {
	for err != nil {
		if err.Error() == "path escapes from parent" {
			return true
		}
		err = errors.Unwrap(err)
	}
	return false
}

// fsError maps an OS error of op: the classes a caller may see become
// refusals, the rest an internal error that names only op.
func fsError(op string, err error, entry int64) error {
	switch {
	case isEscape(err):
		return refuse(ReasonPathEscapes, entry)
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return refuse(ReasonWorkspaceFull, entry)
	case errors.Is(err, syscall.ENOTDIR):
		return refuse(ReasonTypeConflict, entry)
	}
	return &internalError{op: op, err: err}
}

// internalError is an OS failure that is not a refusal. Its text is the
// operation's name only; Unwrap keeps the cause for errors.Is.
type internalError struct {
	op  string
	err error
}

func (e *internalError) Error() string { return fmt.Sprintf("filexfer: %s failed", e.op) }
func (e *internalError) Unwrap() error { return e.err }

// notExist reports a missing name.
func notExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
