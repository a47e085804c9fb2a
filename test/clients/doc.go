// Package clients runs the example agent loops of the generated clients
// (clients/python/examples/agent_loop.py,
// clients/typescript/examples/agent-loop.ts and, for Go, the program in
// ./agentloop over berth.dev/proto/berth/admin/v1) as a user runs them,
// in sequence against one real berth-core with its Runtime gateway and a
// real berth-nodeagent over the test engine: each creates a Session,
// waits until its Runtime admits Turns, uploads input.txt
// (FileService.UploadFiles, FILE_FORMAT_RAW), runs one Turn streaming its
// output, downloads the result.txt the Turn wrote (DownloadFiles,
// FILE_FORMAT_RAW), and deletes the Session. The test checks what the loop
// printed and its exit status against the command's: the uploaded input
// read back by the Turn, the input's byte count computed in the Session
// and downloaded, and the upload's and download's sizes. Then the world:
// the Session is DELETED by the admin API, its one Turn completed with the
// command's status, and the engine holds nothing of the installation.
//
// The Go example lives in the test module because no module of the
// workspace is the clients' own: the test module already requires
// berth.dev/proto, gRPC and the error details, so a main package here
// needs no new go.mod, go.work entry or Makefile module.
//
// The clients' tools (Debian's python3-grpcio and python3-protobuf, the
// npm packages of clients/typescript/package-lock.json) are provisioned by
// scripts/gen-clients --provision-only, which make verify runs first.
package clients
