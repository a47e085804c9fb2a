// Package dockertest is a fake Docker Engine for fault injection: an
// httptest server that speaks the subset of the Docker Engine HTTP API the
// Berth Docker adapter uses, as the github.com/moby/moby/client module
// (v0.6.2) sends it. It keeps a small stateful model (containers, volumes,
// images, copied archives, execs), records every call it receives under a
// stable name and injects one-shot native-side faults per call name.
//
// It exists so that the shared contract suite (berth.dev/sandbox/contracttest)
// can drive the real adapter, through the real Docker client, into transport
// drops, engine errors and cancellations that a real engine cannot produce
// on demand. It is a test fixture only. It NEVER replaces acceptance testing
// against a real Docker Engine: it models no images, filesystems, processes,
// cgroups, networks or storage drivers, its exec runs a tiny built-in command
// set, and where it answers like a real engine it does so only for the
// endpoints and cases listed below. Behaviour that passes here must still be
// proved against a real engine.
//
// # Modelled API
//
// Every path accepts an optional "/v1.NN" version prefix. Versions above
// APIVersion (1.51) or below MinAPIVersion (1.24) are refused with 400, as a
// real engine refuses them. Every response carries the Api-Version header.
//
//	ping               GET|HEAD /_ping
//	version            GET /version
//	info               GET /info
//	image.inspect      GET /images/{name}/json
//	container.list     GET /containers/json?all=&limit=&filters=
//	container.inspect  GET /containers/{id}/json
//	container.create   POST /containers/create?name=
//	container.archive  PUT /containers/{id}/archive?path=
//	container.archive_read  GET /containers/{id}/archive?path= (inside a
//	                   volume mount: the volume's entries written through a
//	                   mount, relative to the path; "/dir/." reads dir's
//	                   contents)
//	container.pause    POST /containers/{id}/pause
//	container.unpause  POST /containers/{id}/unpause
//	container.start    POST /containers/{id}/start
//	container.stop     POST /containers/{id}/stop
//	container.kill     POST /containers/{id}/kill
//	container.remove   DELETE /containers/{id}?force=&v=
//	container.stats    GET /containers/{id}/stats?stream=false
//	volume.list        GET /volumes?filters=
//	volume.inspect     GET /volumes/{name}
//	volume.create      POST /volumes/create
//	volume.remove      DELETE /volumes/{name}?force=
//	exec.create        POST /containers/{id}/exec
//	exec.start         POST /exec/{id}/start (hijacked, or detached)
//	exec.inspect       GET /exec/{id}/json
//
// Anything else is recorded as "unknown METHOD PATH" and answered 404.
//
// Engine behaviour reproduced on purpose, because adapters get it wrong:
// creating a volume whose name exists returns the existing volume unchanged
// (201); removing an absent volume with force=1 succeeds; a container create
// names an image that must be present (PutImage) or fails 404; named
// volumes referenced by a create's mounts or binds are created on the fly,
// unlabelled unless the mount carries VolumeOptions.Labels; removing a
// running container without force is refused (409); starting a running
// container answers 304; an archive into a read-only rootfs outside a
// writable mount is refused (403).
//
// # Exec
//
// exec.start with "Connection: Upgrade" answers "101 UPGRADED", hijacks the
// connection, reads stdin (when the exec attached it) until the client
// closes its write side, runs the command and writes its output as stdcopy
// frames (raw when the exec has a TTY), then closes. The built-in commands:
//
//	echo ARGS...   ARGS joined by spaces and a newline to stdout
//	cat            stdin to stdout
//	fail N MSG...  MSG to stderr, exit N
//	big N          N bytes of 'x' to stdout
//	interleave     "o1" to stdout, "e1" to stderr, "o2" to stdout
//	anything else  "NAME: not found" to stderr, exit 127
//
// An exec's exit is recorded before its stream closes, so exec.inspect
// after the end of the stream reports it; SetExecInspectLag makes the first
// inspections still report Running, as a real engine may.
//
// # Faults
//
// FaultVolumeLabelsLost (volume.create only) keeps the volume without its
// labels and answers 500, as dockerd does when its data root is full.
//
// Arm makes the next call with a given name fail once. FaultDrop drops the
// connection without an answer and without performing the call (for
// exec.start: before the 101). FaultServerError answers 500 with
// ServerErrorMessage without performing the call. FaultCancelAfterDispatch
// performs the call, runs the armed cancel function and withholds the answer
// until the client goes away.
//
// For exec.start, FaultCancelAfterDispatch sends the 101, runs the command to
// completion (reading its stdin to the end, when attached), streams nothing,
// then cancels and holds the hijacked connection open. Without stdin it
// waits a short grace period before cancelling, so that the client has
// handed the connection to its caller: the Docker client ties a hijacked
// connection to the context only during the handshake, so a caller blocked
// reading the stream must itself close the connection when its context
// ends, or hang.
package dockertest
