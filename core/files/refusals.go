package files

import (
	"fmt"

	"berth.dev/runtimebootstrap/filexfer"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/store"
)

// The reasons this package adds to filexfer's (the FileService comment
// lists them all with their classes).
const (
	ReasonSessionFileLimit  = "session_file_limit"
	ReasonCoreFileLimit     = "core_file_limit"
	ReasonRuntimeLacksFiles = "runtime_lacks_files"
	ReasonInterrupted       = "file_operation_interrupted"
	ReasonNotAttached       = "file_transfer_not_attached"
	ReasonStalled           = "file_transfer_stalled"
)

// fixed are the refusals whose message names no configured value, by
// reason. Their messages say what to do.
var fixed = map[string]*errdefs.Refusal{
	filexfer.ReasonPathAbsolute: errdefs.Refuse(errdefs.ErrInvalid, filexfer.ReasonPathAbsolute,
		"an absolute path must lie under /workspace and tar entry names must be relative"),
	filexfer.ReasonPathEscapes: errdefs.Refuse(errdefs.ErrInvalid, filexfer.ReasonPathEscapes,
		"a path leaves /workspace through .. or a symlink: keep every path inside the workspace"),
	filexfer.ReasonSymlinkEscapes: errdefs.Refuse(errdefs.ErrInvalid, filexfer.ReasonSymlinkEscapes,
		"a symlink's target leaves /workspace: only links that stay inside the workspace are written"),
	filexfer.ReasonHardlinkOutside: errdefs.Refuse(errdefs.ErrInvalid, filexfer.ReasonHardlinkOutside,
		"a hard link names no earlier regular file of the archive: put its target first or copy the file"),
	filexfer.ReasonFileTypeRefused: errdefs.Refuse(errdefs.ErrInvalid, filexfer.ReasonFileTypeRefused,
		"only regular files, directories, symlinks and hard links are written: remove devices, FIFOs and sockets"),
	filexfer.ReasonDuplicateEntry: errdefs.Refuse(errdefs.ErrInvalid, filexfer.ReasonDuplicateEntry,
		"the archive names the same path twice: keep one entry per path"),
	filexfer.ReasonTypeConflict: errdefs.Refuse(errdefs.ErrInvalid, filexfer.ReasonTypeConflict,
		"an entry's type conflicts with what its path holds (a file over a directory or the reverse): remove it first"),
	filexfer.ReasonPathTooLong: errdefs.Refuse(errdefs.ErrInvalid, filexfer.ReasonPathTooLong,
		"a path is over 4096 bytes, has a name over 255 bytes or is not valid UTF-8 without NUL: shorten it"),
	filexfer.ReasonInvalidArchive: errdefs.Refuse(errdefs.ErrInvalid, filexfer.ReasonInvalidArchive,
		"the upload is not a valid tar archive or its data does not match its declared sizes: send a POSIX tar"),
	filexfer.ReasonFileExists: errdefs.Refuse(errdefs.ErrFailedPrecondition, filexfer.ReasonFileExists,
		"a path exists and no_overwrite is set: remove it or allow overwriting"),
	filexfer.ReasonNotFound: errdefs.Refuse(errdefs.ErrFailedPrecondition, filexfer.ReasonNotFound,
		"the path does not exist in the workspace"),
	filexfer.ReasonNotRegular: errdefs.Refuse(errdefs.ErrFailedPrecondition, filexfer.ReasonNotRegular,
		"the path is not a regular file: download it with format tar"),
	filexfer.ReasonWorkspaceFull: errdefs.Refuse(errdefs.ErrFailedPrecondition, filexfer.ReasonWorkspaceFull,
		"the workspace has no room for the upload: free space in it or raise the deployment's disk"),
	ReasonRuntimeLacksFiles: errdefs.Refuse(errdefs.ErrFailedPrecondition, ReasonRuntimeLacksFiles,
		"the session's runtime predates file operations: create the session again with a current runtime image"),
	ReasonInterrupted: errdefs.Refuse(errdefs.ErrObservationUnavailable, ReasonInterrupted,
		"the runtime's connection ended during the transfer: retry with a new request_id (each file is replaced atomically)"),
	store.TurnFailureSessionDeleted: errdefs.Refuse(errdefs.ErrFailedPrecondition, store.TurnFailureSessionDeleted,
		"the session is being deleted"),
	store.TurnFailureSessionArchived: errdefs.Refuse(errdefs.ErrFailedPrecondition, store.TurnFailureSessionArchived,
		"the session was archived"),
	store.TurnFailureEnvironmentFailed: errdefs.Refuse(errdefs.ErrFailedPrecondition, store.TurnFailureEnvironmentFailed,
		"the session's environment failed"),
	store.TurnFailureEnvironmentExpired: errdefs.Refuse(errdefs.ErrFailedPrecondition, store.TurnFailureEnvironmentExpired,
		"the session's environment expired"),
	store.FileFailureCoreRestarted: errdefs.Refuse(errdefs.ErrObservationUnavailable, store.FileFailureCoreRestarted,
		"core restarted during the operation: retry with a new request_id"),
}

// refusals holds every refusal, the bounds' with their configured values.
type refusals struct {
	byReason                map[string]*errdefs.Refusal
	sessionLimit, coreLimit *errdefs.Refusal
	notAttached, stalled    *errdefs.Refusal
	interrupted             *errdefs.Refusal
}

func newRefusals(l Limits) refusals {
	r := refusals{byReason: map[string]*errdefs.Refusal{}}
	for k, v := range fixed {
		r.byReason[k] = v
	}
	bound := func(class error, reason, format string, v any) *errdefs.Refusal {
		rf := errdefs.Refuse(class, reason, fmt.Sprintf(format, v))
		r.byReason[reason] = rf
		return rf
	}
	bound(errdefs.ErrInvalid, filexfer.ReasonFileTooLarge, "an entry exceeds the per-file bound files_max_file_bytes of %d bytes: split it", l.MaxFileBytes)
	bound(errdefs.ErrInvalid, filexfer.ReasonUploadTooLarge, "the upload exceeds the per-request bound files_max_bytes of %d bytes: split it", l.MaxBytes)
	bound(errdefs.ErrInvalid, filexfer.ReasonDownloadTooLarge, "the download exceeds the per-request bound files_max_bytes of %d bytes: download a smaller tree", l.MaxBytes)
	bound(errdefs.ErrInvalid, filexfer.ReasonTooManyEntries, "the operation exceeds the per-request bound files_max_entries of %d entries: split it", l.MaxEntries)
	r.sessionLimit = bound(errdefs.ErrFailedPrecondition, ReasonSessionFileLimit,
		"the session already has files_per_session (%d) file operations pending or running: retry after one ends", l.PerSession)
	r.coreLimit = bound(errdefs.ErrFailedPrecondition, ReasonCoreFileLimit,
		"core already runs files_per_core (%d) file operations: retry shortly", l.PerCore)
	r.notAttached = bound(errdefs.ErrObservationUnavailable, ReasonNotAttached,
		"no runtime took the operation within files_attach_wait (%s): retry once the session's runtime is connected", l.AttachWait)
	r.stalled = bound(errdefs.ErrObservationUnavailable, ReasonStalled,
		"the transfer made no progress for files_stall (%s): retry with a new request_id", l.Stall)
	r.interrupted = fixed[ReasonInterrupted]
	return r
}

// of is the refusal of a fixed reason from filexfer or the Runtime; an
// unknown reason (a Runtime out of protocol) is an interruption.
func (r refusals) of(reason string) *errdefs.Refusal {
	if rf, ok := r.byReason[reason]; ok {
		return rf
	}
	return r.interrupted
}

// recorded is the refusal of a failure code the store recorded first
// (a terminal cleanup, the connection's end, another owner's sweep).
func (r refusals) recorded(code string) error {
	if code == store.FileFailureRuntimeDisconnected || code == "" {
		return r.interrupted
	}
	return r.of(code)
}
