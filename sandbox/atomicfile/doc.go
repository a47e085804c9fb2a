// Package atomicfile writes small state files durably: after a crash a
// file holds either its old content or its new one, never a part. The node
// agent keeps its identity and owner epoch with it, the Docker adapter its
// volume intents.
//
// Rules:
//   - Write is the only way in: a temporary file in the same directory,
//     fsync, rename, fsync of the directory. A caller that returns after
//     Write succeeded may rely on the content surviving a power loss.
//   - The file's mode is set before any byte is written, so a secret never
//     sits in a file more open than asked.
//   - It imports only the standard library.
package atomicfile
