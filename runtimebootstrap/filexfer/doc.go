// Package filexfer is the confined writer and reader of a workspace tree:
// berth-runtime applies an upload's entries with a Writer and walks a
// download with Walk inside the sandbox, Core checks a client's archive
// lexically with CleanName, ResolvePath and FromTarHeader before a byte is
// forwarded, and berthctl extracts a download locally with a Writer.
//
// Rules:
//   - Every filesystem operation goes through an os.Root opened on the
//     workspace, so neither ".." nor a symbolic link (one that was there
//     before the operation included) leads outside it.
//   - An entry name is slash-separated, relative and has one spelling: no
//     "..", "." or empty components survive CleanName, so duplicates are
//     found by comparing strings.
//   - A symlink's target is checked lexically, from the link's directory
//     relative to the workspace root; an absolute target must lie under
//     the workspace's absolute path (WriterConfig.WorkspacePath). The
//     check covers the link as named: a link resolved later through other
//     links is still confined by os.Root for every operation of this
//     package.
//   - A file reaches its name only by a rename from a temporary name in
//     the same directory (".berth-upload-<op>-<n>"), so a reader sees the
//     old file or the new one. Temporary names are listed in a journal
//     (when the caller gives a journal directory) before they are created,
//     so Sweep removes what a killed process left behind.
//   - Limits are checked from an entry's header, before any byte of it is
//     written; a sparse archive entry counts with its logical size.
//   - A refusal is a *Refusal with a fixed reason and the entry's index:
//     it never carries a path, a file name or text from the OS, so a
//     caller can log and send it as is. Other errors are internal; their
//     text names only the operation that failed and must not be sent.
//   - Ownership is never changed; setuid, setgid and sticky bits are
//     dropped and counted (Stats.ModesMasked).
//   - The package uses the standard library only and imports no other
//     Berth package.
package filexfer
