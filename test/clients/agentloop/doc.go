// Command agentloop is an agent's loop over Berth's admin API in Go, the
// same as the Python and TypeScript clients' examples
// (clients/python/examples/agent_loop.py,
// clients/typescript/examples/agent-loop.ts): create a Session, wait until
// its Runtime accepts Turns, upload an input file, run one Turn streaming
// its output, download the file the Turn wrote, fork the Session into
// branches (--forks, default 2) that each run a Turn writing branch.txt,
// downloaded from the branch, delete them all. It does what these berthctl
// commands do, with FileService's UploadFiles and DownloadFiles between
// them:
//
//	berthctl session create --wait
//	berthctl turn run SESSION -- CMD [ARG...]
//	berthctl session fork SESSION --count 2 --wait
//	berthctl session delete SESSION --wait
//
// The Go client is the generated package berth.dev/proto/berth/admin/v1
// over google.golang.org/grpc; this program is its only hand-written part.
// The input (--input, default a line of text) becomes /workspace/input.txt;
// the command (default: cat input.txt; wc -c < input.txt > result.txt) runs
// in /workspace; when it completed, /workspace/result.txt (--result) is
// downloaded and written to stdout after the command's output (a command
// that wrote none is noted on stderr). Run it from the repository:
//
//	BERTH_ADMIN_TOKEN_FILE=/var/lib/berth-core/admin-token go run ./test/clients/agentloop
//	go run ./test/clients/agentloop --input "$(date)" --shell 'tr a-z A-Z < input.txt > result.txt'
//
// It exits with the command's exit status; 124 when the Turn timed out, 130
// when it was cancelled (Ctrl-C cancels it), 1 when it failed or anything
// else went wrong.
//
// Rules: it imports nothing of Berth but berth.dev/proto (beside gRPC,
// protobuf, errdetails and uuid), so a user's program can start from a
// copy of it; test/clients runs it and relies on its output: the Turn's
// stdout, then the downloaded file, and on stderr the "agent-loop:"
// lines (created, uploaded, downloaded, "branch N: branch-N SIZE").
package main
