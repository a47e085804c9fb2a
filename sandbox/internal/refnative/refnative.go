package refnative

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The native calls, as recorded.
const (
	CallInspect   = "inspect"
	CallCreate    = "create"
	CallBootstrap = "bootstrap"
	CallStart     = "start"
	CallRemove    = "remove"
	CallExec      = "exec"
	CallStats     = "stats"
)

var mutating = map[string]bool{
	CallCreate: true, CallBootstrap: true, CallStart: true, CallRemove: true, CallExec: true,
}

// Mutating reports whether a native call changes state.
func Mutating(call string) bool { return mutating[call] }

// Fault is a native-side failure for one call.
type Fault int

const (
	// FaultNone answers normally.
	FaultNone Fault = iota
	// FaultDrop receives the call, does not perform it and drops the
	// connection without an answer.
	FaultDrop
	// FaultCancelAfterDispatch performs the call, then runs the armed
	// cancel function and withholds the answer until the caller gives up.
	FaultCancelAfterDispatch
	// FaultServerError answers 500 without performing the call.
	FaultServerError
)

// Resource is one native resource.
type Resource struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	Labels    map[string]string `json:"labels"`
	State     string            `json:"state"`
	Bootstrap []byte            `json:"-"`
	// BootstrapDone is set by the bootstrap call.
	BootstrapDone bool `json:"bootstrap_done"`
}

type armed struct {
	fault  Fault
	cancel context.CancelFunc
}

// Server is the native service.
type Server struct {
	*httptest.Server

	mu     sync.Mutex
	nextID int
	byName map[string]*Resource
	calls  []string
	faults map[string]armed
}

// Start starts a Server and closes it at the end of the test.
func Start(t testing.TB) *Server {
	s := &Server{byName: map[string]*Resource{}, faults: map[string]armed{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/resources/{name}", s.handle(CallInspect, s.inspect))
	mux.HandleFunc("POST /v1/resources", s.handle(CallCreate, s.create))
	mux.HandleFunc("PUT /v1/resources/{name}/bootstrap", s.handle(CallBootstrap, s.bootstrap))
	mux.HandleFunc("POST /v1/resources/{name}/start", s.handle(CallStart, s.start))
	mux.HandleFunc("DELETE /v1/resources/{name}", s.handle(CallRemove, s.remove))
	mux.HandleFunc("POST /v1/resources/{name}/exec", s.handle(CallExec, s.exec))
	mux.HandleFunc("GET /v1/resources/{name}/stats", s.handle(CallStats, s.stats))
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// Arm makes the next call named call fail with fault. cancel is run by
// FaultCancelAfterDispatch once the call has been performed.
func (s *Server) Arm(call string, fault Fault, cancel context.CancelFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[call] = armed{fault: fault, cancel: cancel}
}

// Calls returns the calls received, in order.
func (s *Server) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// ResetCalls forgets the recorded calls.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
}

// Put stores a resource directly, bypassing the API (for foreign resources
// that no adapter created).
func (s *Server) Put(name string, labels map[string]string, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	s.byName[name] = &Resource{ID: "r" + strconv.Itoa(s.nextID), Name: name, Labels: labels, State: state}
}

// Get returns a copy of the named resource.
func (s *Server) Get(name string) (Resource, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.byName[name]
	if !ok {
		return Resource{}, false
	}
	return *r, true
}

// Len returns the number of resources.
func (s *Server) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byName)
}

type handler func(w http.ResponseWriter, r *http.Request) (status int, body any)

func (s *Server) handle(call string, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.calls = append(s.calls, call)
		a := s.faults[call]
		delete(s.faults, call)
		s.mu.Unlock()

		switch a.fault {
		case FaultDrop:
			// The standard way to end a handler without an answer: the
			// server closes the connection and logs nothing.
			panic(http.ErrAbortHandler)
		case FaultServerError:
			writeJSON(w, http.StatusInternalServerError, map[string]string{"message": "native failure: secret-native-detail"})
			return
		}
		status, body := h(w, r)
		if a.fault == FaultCancelAfterDispatch {
			if a.cancel != nil {
				a.cancel()
			}
			<-r.Context().Done()
			return
		}
		writeJSON(w, status, body)
	}
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if body != nil {
		_ = json.NewEncoder(w).Encode(body)
	}
}

func notFound() (int, any) {
	return http.StatusNotFound, map[string]string{"message": "no such resource"}
}

func (s *Server) inspect(_ http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res, ok := s.byName[r.PathValue("name")]
	if !ok {
		return notFound()
	}
	return http.StatusOK, res
}

// CreateBody is the create call's body.
type CreateBody struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

func (s *Server) create(_ http.ResponseWriter, r *http.Request) (int, any) {
	var body CreateBody
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Name == "" {
		return http.StatusBadRequest, map[string]string{"message": "bad body"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byName[body.Name]; ok {
		return http.StatusConflict, map[string]string{"message": "name in use"}
	}
	s.nextID++
	res := &Resource{ID: "r" + strconv.Itoa(s.nextID), Name: body.Name, Labels: body.Labels, State: "created"}
	s.byName[body.Name] = res
	return http.StatusCreated, res
}

func (s *Server) bootstrap(_ http.ResponseWriter, r *http.Request) (int, any) {
	data, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return http.StatusBadRequest, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res, ok := s.byName[r.PathValue("name")]
	if !ok {
		return notFound()
	}
	res.Bootstrap = data
	res.BootstrapDone = true
	return http.StatusNoContent, nil
}

func (s *Server) start(_ http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res, ok := s.byName[r.PathValue("name")]
	if !ok {
		return notFound()
	}
	res.State = "running"
	return http.StatusNoContent, nil
}

func (s *Server) remove(_ http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := r.PathValue("name")
	if _, ok := s.byName[name]; !ok {
		return notFound()
	}
	delete(s.byName, name)
	return http.StatusNoContent, nil
}

// ExecBody is the exec call's body.
type ExecBody struct {
	Args  []string `json:"args"`
	Stdin []byte   `json:"stdin"`
}

// ExecResult is the exec call's answer.
type ExecResult struct {
	Stdout   []byte `json:"stdout"`
	Stderr   []byte `json:"stderr"`
	ExitCode int    `json:"exit_code"`
}

// exec runs a tiny built-in command set: "echo ARGS...", "cat" (stdin to
// stdout), "fail N MSG" (MSG to stderr, exit N).
func (s *Server) exec(_ http.ResponseWriter, r *http.Request) (int, any) {
	var body ExecBody
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Args) == 0 {
		return http.StatusBadRequest, map[string]string{"message": "bad body"}
	}
	s.mu.Lock()
	res, ok := s.byName[r.PathValue("name")]
	running := ok && res.State == "running"
	s.mu.Unlock()
	if !ok {
		return notFound()
	}
	if !running {
		return http.StatusConflict, map[string]string{"message": "not running"}
	}
	switch body.Args[0] {
	case "echo":
		return http.StatusOK, ExecResult{Stdout: []byte(strings.Join(body.Args[1:], " ") + "\n")}
	case "cat":
		return http.StatusOK, ExecResult{Stdout: body.Stdin}
	case "fail":
		code := 1
		if len(body.Args) > 1 {
			code, _ = strconv.Atoi(body.Args[1])
		}
		return http.StatusOK, ExecResult{Stderr: []byte(strings.Join(body.Args[2:], " ")), ExitCode: code}
	}
	return http.StatusOK, ExecResult{Stderr: []byte(fmt.Sprintf("%s: not found", body.Args[0])), ExitCode: 127}
}

// Stats is the stats call's answer.
type Stats struct {
	CPUNanos    uint64 `json:"cpu_nanos"`
	MemoryBytes uint64 `json:"memory_bytes"`
	MemoryLimit uint64 `json:"memory_limit"`
	PIDs        uint64 `json:"pids"`
}

func (s *Server) stats(_ http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byName[r.PathValue("name")]; !ok {
		return notFound()
	}
	return http.StatusOK, Stats{CPUNanos: 1_000_000, MemoryBytes: 64 << 20, MemoryLimit: 512 << 20, PIDs: 3}
}
