// Command seccompgen writes the Runtime seccomp profile and its companions
// into a directory (`make generate` passes -out deploy/runtime):
//
//	seccomp.json         seccompprofile.Build's output
//	seccomp.json.sha256  its digest, in sha256sum's format
//	seccomp.LICENSE      a header naming the upstream module version, then
//	                     that module's LICENSE file as it ships
//
// Rules:
//   - It runs in the repository (it asks `go list -m` where the upstream
//     module is), so the version it names is the one Build was compiled
//     against.
//   - Its output is committed and never edited by hand; make
//     verify-generated runs it into a copy of the tree and fails on any
//     difference.
package main
