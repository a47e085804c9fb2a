package dockertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/common"
	"github.com/moby/moby/api/types/system"
)

// What the fixture reports about itself.
const (
	// APIVersion is the highest API version the fixture speaks, sent in the
	// Api-Version header of every answer.
	APIVersion = "1.51"
	// MinAPIVersion is the lowest API version the fixture accepts.
	MinAPIVersion = "1.24"
	// EngineVersion is the engine release the fixture claims to be.
	EngineVersion = "28.3.3"
	// EngineID and EngineName are the /info ID and Name.
	EngineID   = "FIXTURE-ENGINE-ID"
	EngineName = "berth-dockertest-engine"
	// ServerErrorMessage is the message of every FaultServerError answer.
	// It must never reach a caller of the adapter.
	ServerErrorMessage = "engine detail: " + SensitiveToken
	// SensitiveToken is the distinctive part of ServerErrorMessage.
	SensitiveToken = "secret-native-text"
)

// The native calls, as recorded.
const (
	CallPing             = "ping"
	CallVersion          = "version"
	CallInfo             = "info"
	CallImageInspect     = "image.inspect"
	CallContainerInspect = "container.inspect"
	CallContainerCreate  = "container.create"
	CallContainerArchive = "container.archive"
	CallContainerStart   = "container.start"
	CallContainerStop    = "container.stop"
	CallContainerKill    = "container.kill"
	CallContainerRemove  = "container.remove"
	CallContainerStats   = "container.stats"
	CallContainerList    = "container.list"
	CallContainerPause   = "container.pause"
	CallContainerUnpause = "container.unpause"
	CallArchiveRead      = "container.archive_read"
	CallVolumeInspect    = "volume.inspect"
	CallVolumeCreate     = "volume.create"
	CallVolumeRemove     = "volume.remove"
	CallVolumeList       = "volume.list"
	CallExecCreate       = "exec.create"
	CallExecStart        = "exec.start"
	CallExecInspect      = "exec.inspect"

	// CallUnknownPrefix starts the name of a call the fixture does not
	// model: "unknown POST /containers/x/pause". Such calls are answered 404.
	CallUnknownPrefix = "unknown "
)

var mutating = map[string]bool{
	CallContainerCreate: true, CallContainerArchive: true, CallContainerStart: true,
	CallContainerStop: true, CallContainerKill: true, CallContainerRemove: true,
	CallContainerPause: true, CallContainerUnpause: true,
	CallVolumeCreate: true, CallVolumeRemove: true,
	CallExecCreate: true, CallExecStart: true,
}

// Mutating reports whether a native call changes engine state. An unknown
// call counts as mutating unless its method is GET or HEAD.
func Mutating(call string) bool {
	if rest, ok := strings.CutPrefix(call, CallUnknownPrefix); ok {
		method, _, _ := strings.Cut(rest, " ")
		return method != http.MethodGet && method != http.MethodHead
	}
	return mutating[call]
}

// Call is one request the fixture received.
type Call struct {
	Name string
	// Method and Path are as received, Path without the version prefix.
	Method string
	Path   string
	// Version is the "/v1.NN" prefix's version, or "" when there was none.
	Version  string
	Query    url.Values
	Mutating bool
}

// Fault is a native-side failure for one call.
type Fault int

const (
	// FaultNone answers normally (and disarms when passed to Arm).
	FaultNone Fault = iota
	// FaultDrop receives the call, does not perform it and drops the
	// connection without an answer.
	FaultDrop
	// FaultCancelAfterDispatch performs the call, then runs the armed
	// cancel function and withholds the answer until the caller goes away.
	FaultCancelAfterDispatch
	// FaultServerError answers 500 with ServerErrorMessage without
	// performing the call.
	FaultServerError
	// FaultHookAfterDispatch performs the call, runs the armed function
	// (for example to kill the caller's caller) and then answers normally,
	// as a real engine does whether or not the client is still there.
	FaultHookAfterDispatch
	// FaultVolumeLabelsLost, for volume.create only, is what a real
	// engine does when its data root is full: the local driver makes the
	// volume, the write of its labels to the volume metadata database
	// fails, and the engine answers 500 and keeps the volume, without any
	// label (observed on dockerd 28 with a full tmpfs data root).
	FaultVolumeLabelsLost
)

func (f Fault) String() string {
	switch f {
	case FaultNone:
		return "none"
	case FaultDrop:
		return "drop"
	case FaultCancelAfterDispatch:
		return "cancel_after_dispatch"
	case FaultServerError:
		return "server_error"
	case FaultHookAfterDispatch:
		return "hook_after_dispatch"
	case FaultVolumeLabelsLost:
		return "volume_labels_lost"
	}
	return "fault(" + strconv.Itoa(int(f)) + ")"
}

type armed struct {
	fault  Fault
	cancel context.CancelFunc
}

// Server is the fake engine. All its methods are safe for concurrent use.
type Server struct {
	srv  *httptest.Server
	mux  *http.ServeMux
	done chan struct{}
	stop sync.Once

	mu         sync.Mutex
	calls      []Call
	faults     map[string]armed
	containers map[string]*ctr // by ID
	volumes    map[string]*vol // by name
	images     []*img
	execs      map[string]*execInst // by ID
	issued     []string             // every native ID handed out
	seq        int64
	pid        int
	execLag    int
	info       system.Info
	hijacked   map[net.Conn]struct{}
	unixPath   string
}

// Start starts a Server on loopback TCP and closes it at the end of the test.
func Start(t testing.TB) *Server {
	s := newServer()
	s.srv = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	t.Cleanup(s.Close)
	return s
}

// StartUnix starts a Server on the Unix socket path, as a node agent's
// configuration names an engine, and closes it at the end of the test.
func StartUnix(t testing.TB, path string) *Server {
	t.Helper()
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("dockertest: listen on %s: %v", path, err)
	}
	s := newServer()
	s.unixPath = path
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serveHTTP))
	s.srv.Listener = lis
	s.srv.Start()
	t.Cleanup(s.Close)
	return s
}

func newServer() *Server {
	s := &Server{
		mux:        http.NewServeMux(),
		done:       make(chan struct{}),
		faults:     map[string]armed{},
		containers: map[string]*ctr{},
		volumes:    map[string]*vol{},
		execs:      map[string]*execInst{},
		hijacked:   map[net.Conn]struct{}{},
		pid:        4000,
		info:       defaultInfo(),
	}
	s.routes()
	return s
}

func (s *Server) routes() {
	s.mux.HandleFunc("GET /_ping", s.handle(CallPing, s.ping))
	s.mux.HandleFunc("GET /version", s.handle(CallVersion, s.version))
	s.mux.HandleFunc("GET /info", s.handle(CallInfo, s.systemInfo))
	s.mux.HandleFunc("GET /images/{rest...}", s.imageRoute)

	s.mux.HandleFunc("GET /containers/json", s.handle(CallContainerList, s.containerList))
	s.mux.HandleFunc("POST /containers/create", s.handle(CallContainerCreate, s.containerCreate))
	s.mux.HandleFunc("GET /containers/{id}/json", s.handle(CallContainerInspect, s.containerInspect))
	s.mux.HandleFunc("PUT /containers/{id}/archive", s.handle(CallContainerArchive, s.containerArchive))
	s.mux.HandleFunc("GET /containers/{id}/archive", s.handle(CallArchiveRead, s.archiveRead))
	s.mux.HandleFunc("POST /containers/{id}/pause", s.handle(CallContainerPause, s.containerPause))
	s.mux.HandleFunc("POST /containers/{id}/unpause", s.handle(CallContainerUnpause, s.containerUnpause))
	s.mux.HandleFunc("POST /containers/{id}/start", s.handle(CallContainerStart, s.containerStart))
	s.mux.HandleFunc("POST /containers/{id}/stop", s.handle(CallContainerStop, s.containerStop))
	s.mux.HandleFunc("POST /containers/{id}/kill", s.handle(CallContainerKill, s.containerKill))
	s.mux.HandleFunc("DELETE /containers/{id}", s.handle(CallContainerRemove, s.containerRemove))
	s.mux.HandleFunc("GET /containers/{id}/stats", s.handle(CallContainerStats, s.containerStats))

	s.mux.HandleFunc("GET /volumes", s.handle(CallVolumeList, s.volumeList))
	s.mux.HandleFunc("POST /volumes/create", s.handle(CallVolumeCreate, s.volumeCreate))
	s.mux.HandleFunc("GET /volumes/{name}", s.handle(CallVolumeInspect, s.volumeInspect))
	s.mux.HandleFunc("DELETE /volumes/{name}", s.handle(CallVolumeRemove, s.volumeRemove))

	s.mux.HandleFunc("POST /containers/{id}/exec", s.handle(CallExecCreate, s.execCreate))
	s.mux.HandleFunc("POST /exec/{id}/start", s.execStart)
	s.mux.HandleFunc("GET /exec/{id}/json", s.handle(CallExecInspect, s.execInspect))

	s.mux.HandleFunc("/", s.unknown)
}

// Host is the address to give client.WithHost: "tcp://127.0.0.1:PORT", or
// "unix:///path" for a server from StartUnix.
func (s *Server) Host() string {
	if s.unixPath != "" {
		return "unix://" + s.unixPath
	}
	return "tcp://" + s.Addr()
}

// Addr is the listener's "127.0.0.1:PORT".
func (s *Server) Addr() string { return s.srv.Listener.Addr().String() }

// URL is the server's "http://127.0.0.1:PORT".
func (s *Server) URL() string { return s.srv.URL }

// Close stops the engine: held answers are released, hijacked connections
// closed and later dials refused. Start arranges it at the end of the test;
// calling it earlier simulates an engine that went away. It is idempotent.
func (s *Server) Close() {
	s.stop.Do(func() {
		// Stop accepting first: a client whose held call is released below
		// may resend it (net/http retries idempotent requests on a fresh
		// connection), and nothing may answer it then.
		_ = s.srv.Listener.Close()
		close(s.done)
		s.mu.Lock()
		for c := range s.hijacked {
			_ = c.Close()
		}
		s.mu.Unlock()
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

// Arm makes the next call named call fail with fault, once. cancel is run by
// FaultCancelAfterDispatch and FaultHookAfterDispatch once the call has
// been performed. Arming
// FaultNone disarms.
func (s *Server) Arm(call string, fault Fault, cancel context.CancelFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fault == FaultNone {
		delete(s.faults, call)
		return
	}
	s.faults[call] = armed{fault: fault, cancel: cancel}
}

// Calls returns the calls received since the last ResetCalls, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Call, len(s.calls))
	for i, c := range s.calls {
		c.Query = cloneValues(c.Query)
		out[i] = c
	}
	return out
}

// CallNames returns the names of the calls received since the last
// ResetCalls, in order.
func (s *Server) CallNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.calls))
	for i, c := range s.calls {
		out[i] = c.Name
	}
	return out
}

// CallsWithout returns Calls without the calls named in names (for example
// CallPing and CallVersion, which the client sends on its own).
func (s *Server) CallsWithout(names ...string) []Call {
	return slices.DeleteFunc(s.Calls(), func(c Call) bool { return slices.Contains(names, c.Name) })
}

// ResetCalls forgets the recorded calls.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
}

// Sensitive lists strings that must never appear in an error an adapter
// returns: the fault message, the endpoint, the engine ID and every native
// container and exec ID the fixture has handed out.
func (s *Server) Sensitive() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string{ServerErrorMessage, SensitiveToken, s.Addr(), EngineID}, s.issued...)
}

// ConfigureInfo lets a test change what /info answers (for example NCPU,
// MemTotal or the cgroup capability flags). NCPU and MemTotal also bound
// container create validation and stats.
func (s *Server) ConfigureInfo(f func(*system.Info)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.info)
}

type versionKey struct{}

// serveHTTP strips the optional version prefix and dispatches.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if v, rest, ok := splitVersion(r.URL.Path); ok {
		r.URL.Path = rest
		r.URL.RawPath = ""
		r = r.WithContext(context.WithValue(r.Context(), versionKey{}, v))
	}
	h := w.Header()
	h.Set("Api-Version", APIVersion)
	h.Set("Docker-Experimental", "false")
	h.Set("Ostype", "linux")
	h.Set("Server", "Docker/"+EngineVersion+" (linux)")
	s.mux.ServeHTTP(w, r)
}

// splitVersion splits "/v1.51/containers/json" into "1.51" and
// "/containers/json".
func splitVersion(p string) (version, rest string, ok bool) {
	after, found := strings.CutPrefix(p, "/v")
	if !found {
		return "", p, false
	}
	v, tail, _ := strings.Cut(after, "/")
	if _, _, err := parseVersion(v); err != nil {
		return "", p, false
	}
	return v, "/" + tail, true
}

func parseVersion(v string) (major, minor int, err error) {
	ma, mi, ok := strings.Cut(v, ".")
	if !ok {
		return 0, 0, fmt.Errorf("bad version %q", v)
	}
	if major, err = strconv.Atoi(ma); err != nil {
		return 0, 0, err
	}
	if minor, err = strconv.Atoi(mi); err != nil {
		return 0, 0, err
	}
	return major, minor, nil
}

func versionLess(a, b string) bool {
	amaj, amin, _ := parseVersion(a)
	bmaj, bmin, _ := parseVersion(b)
	return amaj < bmaj || (amaj == bmaj && amin < bmin)
}

// checkVersion refuses versions the engine does not speak, as a real engine
// does.
func checkVersion(r *http.Request) *reply {
	v, _ := r.Context().Value(versionKey{}).(string)
	switch {
	case v == "":
		return nil
	case versionLess(APIVersion, v):
		return errReply(http.StatusBadRequest, "client version %s is too new. Maximum supported API version is %s", v, APIVersion)
	case versionLess(v, MinAPIVersion):
		return errReply(http.StatusBadRequest, "client version %s is too old. Minimum supported API version is %s, please upgrade your client to a newer version", v, MinAPIVersion)
	}
	return nil
}

// begin records the call and takes its armed fault.
func (s *Server) begin(name string, r *http.Request) armed {
	v, _ := r.Context().Value(versionKey{}).(string)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, Call{
		Name:     name,
		Method:   r.Method,
		Path:     r.URL.Path,
		Version:  v,
		Query:    cloneValues(r.URL.Query()),
		Mutating: Mutating(name),
	})
	a := s.faults[name]
	delete(s.faults, name)
	return a
}

// reply is a handler's answer.
type reply struct {
	status int
	body   any    // JSON-encoded
	text   []byte // written as text/plain when body is nil
	// raw is written as application/x-tar with header (an archive read)
	// when body and text are nil.
	raw    []byte
	header map[string]string
}

func errReply(status int, format string, args ...any) *reply {
	return &reply{status: status, body: common.ErrorResponse{Message: fmt.Sprintf(format, args...)}}
}

func jsonReply(status int, body any) *reply { return &reply{status: status, body: body} }

// admit records the call and takes the fault armed for it. It answers the
// request itself, and returns false, where the fault drops or fails the
// call before dispatch or the API version is refused; every handler, the
// hijacking exec start included, begins the same way.
func (s *Server) admit(name string, w http.ResponseWriter, r *http.Request) (armed, bool) {
	a := s.begin(name, r)
	switch a.fault {
	case FaultDrop:
		// The standard way to end a handler without an answer: the
		// server closes the connection and logs nothing.
		panic(http.ErrAbortHandler)
	case FaultServerError:
		writeReply(w, errReply(http.StatusInternalServerError, "%s", ServerErrorMessage))
		return a, false
	}
	if rep := checkVersion(r); rep != nil {
		writeReply(w, rep)
		return a, false
	}
	return a, true
}

func (s *Server) handle(name string, h func(*http.Request) *reply) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a, ok := s.admit(name, w, r)
		if !ok {
			return
		}
		if a.fault == FaultVolumeLabelsLost && name == "volume.create" {
			writeReply(w, s.volumeCreateLosingLabels(r))
			return
		}
		rep := h(r)
		switch a.fault {
		case FaultCancelAfterDispatch:
			s.withhold(r, a.cancel)
			return
		case FaultHookAfterDispatch:
			if a.cancel != nil {
				a.cancel()
			}
		}
		writeReply(w, rep)
	}
}

// withhold runs cancel and waits, without answering, until the client goes
// away or the server closes.
func (s *Server) withhold(r *http.Request, cancel context.CancelFunc) {
	// The connection's context only ends on a client close once the body
	// has been read to its end.
	_, _ = io.Copy(io.Discard, r.Body)
	if cancel != nil {
		cancel()
	}
	select {
	case <-r.Context().Done():
	case <-s.done:
	}
	// Never answer a withheld call: returning normally would send an empty
	// 200 to a client that is still there.
	panic(http.ErrAbortHandler)
}

func writeReply(w http.ResponseWriter, rep *reply) {
	switch {
	case rep.body != nil:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.status)
		_ = json.NewEncoder(w).Encode(rep.body)
	case rep.text != nil:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(rep.text)))
		w.WriteHeader(rep.status)
		_, _ = w.Write(rep.text)
	case rep.raw != nil:
		for k, v := range rep.header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/x-tar")
		w.WriteHeader(rep.status)
		_, _ = w.Write(rep.raw)
	default:
		w.WriteHeader(rep.status)
	}
}

func (s *Server) unknown(w http.ResponseWriter, r *http.Request) {
	a := s.begin(CallUnknownPrefix+r.Method+" "+r.URL.Path, r)
	if a.fault == FaultDrop {
		panic(http.ErrAbortHandler)
	}
	writeReply(w, errReply(http.StatusNotFound, "page not found"))
}

func cloneValues(v url.Values) url.Values {
	if v == nil {
		return nil
	}
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}

// boolValue reads a query flag the way the engine does.
func boolValue(q url.Values, key string) bool {
	switch strings.ToLower(strings.TrimSpace(q.Get(key))) {
	case "", "0", "no", "false", "none":
		return false
	}
	return true
}

func (s *Server) ping(r *http.Request) *reply {
	return &reply{status: http.StatusOK, text: []byte("OK")}
}

func (s *Server) version(*http.Request) *reply {
	return jsonReply(http.StatusOK, system.VersionResponse{
		Platform:      system.PlatformInfo{Name: "Berth dockertest fixture"},
		Version:       EngineVersion,
		APIVersion:    APIVersion,
		MinAPIVersion: MinAPIVersion,
		Os:            "linux",
		Arch:          "amd64",
		KernelVersion: "6.1.0-dockertest",
		GoVersion:     "go1.24.5",
		GitCommit:     "dockertest",
	})
}

func defaultInfo() system.Info {
	return system.Info{
		ID:              EngineID,
		Name:            EngineName,
		Driver:          "overlay2",
		MemoryLimit:     true,
		SwapLimit:       true,
		CPUCfsPeriod:    true,
		CPUCfsQuota:     true,
		CPUShares:       true,
		CPUSet:          true,
		PidsLimit:       true,
		IPv4Forwarding:  true,
		LoggingDriver:   "json-file",
		CgroupDriver:    "systemd",
		CgroupVersion:   "2",
		KernelVersion:   "6.1.0-dockertest",
		OperatingSystem: "Berth dockertest fixture",
		OSVersion:       "12",
		OSType:          "linux",
		Architecture:    "x86_64",
		NCPU:            8,
		MemTotal:        16 << 30,
		DockerRootDir:   "/var/lib/docker",
		ServerVersion:   EngineVersion,
		DefaultRuntime:  "runc",
		Runtimes:        map[string]system.RuntimeWithStatus{"runc": {Runtime: system.Runtime{Path: "runc"}}},
		SecurityOptions: []string{"name=seccomp,profile=builtin", "name=cgroupns"},
	}
}

func (s *Server) systemInfo(*http.Request) *reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := s.info
	info.Containers = len(s.containers)
	info.ContainersRunning, info.ContainersStopped = 0, 0
	for _, c := range s.containers {
		if c.State == StateRunning {
			info.ContainersRunning++
		} else {
			info.ContainersStopped++
		}
	}
	info.Images = len(s.images)
	info.SystemTime = time.Now().Format(time.RFC3339Nano)
	return jsonReply(http.StatusOK, info)
}
