// Package fileadmin is the thin gRPC adapter of berth.admin.v1.FileService
// over the logic of core/files, served by the admin server
// (admin.Options.Services).
//
// Rules:
//   - It parses the header (the first message of an upload, the request
//     of a download), adapts the streams to core/files' Source and Sink,
//     and forwards; the admin server converts errors once.
//   - It holds at most one data message in hand: the bytes are never
//     buffered whole.
//   - A call whose client went away ends with the caller's context error.
package fileadmin
