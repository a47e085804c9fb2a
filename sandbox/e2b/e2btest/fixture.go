package e2btest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
)

// The fixture's own faults, beside contracttest's.
const (
	// FaultHang holds the call, unperformed, until Release or until the
	// client gives up (then it is never performed).
	FaultHang contracttest.Fault = "hang"
	// FaultCommit500 performs the call and answers 500.
	FaultCommit500 contracttest.Fault = "commit_500"
	// Fault500 answers 500 without performing the call.
	Fault500 contracttest.Fault = "500"
	// FaultRateLimit answers 429 with Retry-After, unperformed.
	FaultRateLimit contracttest.Fault = "429"
	// FaultLostAnswer performs the call and drops the connection.
	FaultLostAnswer contracttest.Fault = "lost_answer"
	// faultStatus answers a chosen status, unperformed (ArmStatus).
	faultStatus contracttest.Fault = "status"
)

// Template is the template reference the fixture knows.
const Template = "berth-runtime"

// nativeDetail is in every error body the fixture sends: it must never
// reach an adapter error.
const nativeDetail = "fixture-native-detail"

// Runner maps the argv a Start names inside the sandbox to the local
// argv the fixture runs for the sandbox whose directory is dir. It is
// the hook where the black-box tests (test/e2b) run the real
// berth-runtime in the sandbox's own namespaces.
type Runner func(dir string, argv []string) []string

// DefaultRunner maps /home/runtime and /workspace paths into dir and
// stubs the Runtime (runtimebootstrap.BinaryPath) with a process that
// only stays alive.
func DefaultRunner(dir string, argv []string) []string {
	if argv[0] == runtimebootstrap.BinaryPath {
		return []string{"/bin/sleep", "3600"}
	}
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = MapPath(dir, a)
	}
	return out
}

// MapPath maps a sandbox path under /home/runtime or /workspace into
// dir; other arguments are returned unchanged.
func MapPath(dir, p string) string {
	for _, root := range []string{"/home/runtime", "/workspace"} {
		if p == root || strings.HasPrefix(p, root+"/") {
			return filepath.Join(dir, p)
		}
	}
	return p
}

// Request is one request the fixture received.
type Request struct {
	Call       string
	Method     string
	Path       string
	Team       string
	Allocation string
}

// Sandbox is a fixture sandbox as tests see it.
type Sandbox struct {
	ID        string
	Team      string
	Template  string
	Metadata  map[string]string
	State     string
	StartedAt time.Time
	EndAt     time.Time
	Dir       string
	Processes int
}

type sandboxState struct {
	Sandbox
	token string
	procs map[int]*proc
}

type proc struct {
	pid    int
	tag    string
	argv   []string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	events chan event
	done   chan struct{}
	timer  *time.Timer
}

type event map[string]any

type armed struct {
	status  int
	fault   contracttest.Fault
	cancel  context.CancelFunc
	release chan struct{}
}

// Fixture is a loopback E2B: one httptest server for the control plane
// and envd (routed by E2b-Sandbox-Id), with teams, a fake clock that
// expires sandboxes, local processes as the sandboxes' processes, fault
// injection and a record of every request.
type Fixture struct {
	// URL is the server's base URL: the adapter's api_url and sandbox_url.
	URL string
	// Key is the default team's API key.
	Key string
	// MaxLength is the longest sandbox lifetime (E2B's plan maximum).
	MaxLength time.Duration
	// Runner maps argv to local processes; DefaultRunner unless set
	// before the first Start.
	Runner Runner

	srv       *httptest.Server
	root      string
	mu        sync.Mutex
	clock     time.Time
	keys      map[string]string
	revoked   map[string]string
	sandboxes map[string]*sandboxState
	calls     []contracttest.NativeCall
	requests  []Request
	armed     map[string][]*armed
	foreign   map[string]time.Time
	argv      [][]string
	gone      []string
	tokens    []string
	held      []*armed
	conns     int
}

// Start starts a fixture and stops it (killing every process) when t ends.
func Start(t testing.TB) *Fixture {
	t.Helper()
	f := &Fixture{
		Key:       "e2b_" + randomHex(20),
		MaxLength: 24 * time.Hour,
		Runner:    DefaultRunner,
		root:      t.TempDir(),
		clock:     time.Now().UTC().Truncate(time.Second),
		keys:      map[string]string{},
		revoked:   map[string]string{},
		sandboxes: map[string]*sandboxState{},
		armed:     map[string][]*armed{},
		foreign:   map[string]time.Time{},
	}
	f.keys[f.Key] = "team-a"
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			f.mu.Lock()
			f.conns++
			f.mu.Unlock()
		}
	}
	f.srv.Start()
	f.URL = f.srv.URL
	t.Cleanup(f.Close)
	return f
}

// Close kills every sandbox and stops the server.
func (f *Fixture) Close() {
	f.mu.Lock()
	ids := make([]string, 0, len(f.sandboxes))
	for id := range f.sandboxes {
		ids = append(ids, id)
	}
	f.mu.Unlock()
	for _, id := range ids {
		f.remove(id)
	}
	f.srv.CloseClientConnections()
	f.srv.Close()
}

// AddTeam returns the API key of a new team, which sees none of the
// other teams' sandboxes.
func (f *Fixture) AddTeam(name string) string { return f.AddKey(name) }

// AddKey returns a new API key of team: E2B issues several keys per
// team, and each sees all of the team's sandboxes.
func (f *Fixture) AddKey(team string) string {
	key := "e2b_" + randomHex(20)
	f.mu.Lock()
	f.keys[key] = team
	f.mu.Unlock()
	return key
}

// RevokeKey makes E2B answer every request with key 401, as after the
// key was deleted in E2B's dashboard; the team's sandboxes go on.
func (f *Fixture) RevokeKey(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if team, ok := f.keys[key]; ok {
		f.revoked[key] = team
		delete(f.keys, key)
	}
}

// RestoreKey accepts a revoked key again, for its team.
func (f *Fixture) RestoreKey(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if team, ok := f.revoked[key]; ok {
		f.keys[key] = team
		delete(f.revoked, key)
	}
}

// Now is the fixture's clock.
func (f *Fixture) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clock
}

// Advance moves the fixture's clock and kills every sandbox past its endAt.
func (f *Fixture) Advance(d time.Duration) {
	f.mu.Lock()
	f.clock = f.clock.Add(d)
	f.mu.Unlock()
	f.expire()
}

func (f *Fixture) expire() {
	f.mu.Lock()
	var ids []string
	for id, s := range f.sandboxes {
		if !f.clock.Before(s.EndAt) {
			ids = append(ids, id)
		}
	}
	f.mu.Unlock()
	for _, id := range ids {
		f.remove(id)
	}
}

// Arm makes the next native call named call fail with fault.
func (f *Fixture) Arm(call string, fault contracttest.Fault, cancel context.CancelFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed[call] = append(f.armed[call], &armed{fault: fault, cancel: cancel, release: make(chan struct{})})
}

// ArmStatus makes the next native call named call answer status with
// E2B's error body, without performing it.
func (f *Fixture) ArmStatus(call string, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed[call] = append(f.armed[call], &armed{fault: faultStatus, status: status, release: make(chan struct{})})
}

// Release lets every held FaultHang call go on.
func (f *Fixture) Release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.held {
		select {
		case <-a.release:
		default:
			close(a.release)
		}
	}
	f.held = nil
}

func (f *Fixture) take(call string) *armed {
	f.mu.Lock()
	defer f.mu.Unlock()
	list := f.armed[call]
	if len(list) == 0 {
		return nil
	}
	f.armed[call] = list[1:]
	if list[0].fault == FaultHang {
		f.held = append(f.held, list[0])
	}
	return list[0]
}

// PlantForeign creates a sandbox with ref's tenant, Environment and
// allocation in its berth_* metadata but another installation's id.
func (f *Fixture) PlantForeign(ref sandbox.Reference) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.newSandbox("team-a", Template, map[string]string{
		"berth_installation": "00000000-0000-4000-8000-00000000f00d",
		"berth_tenant":       ref.TenantID,
		"berth_environment":  ref.EnvironmentID,
		"berth_allocation":   ref.AllocationID,
	}, time.Hour)
	f.foreign[s.ID] = s.EndAt
}

// ForeignIntact reports whether every planted sandbox still exists
// unchanged.
func (f *Fixture) ForeignIntact() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, end := range f.foreign {
		s, ok := f.sandboxes[id]
		if !ok || !s.EndAt.Equal(end) || s.State != "running" {
			return false
		}
	}
	return true
}

// Calls returns the calls received since the last ResetCalls.
func (f *Fixture) Calls() []contracttest.NativeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// ResetCalls forgets the calls received so far (not the requests).
func (f *Fixture) ResetCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
}

// Requests returns every request received since Start.
func (f *Fixture) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// Argv returns the argv of every process the fixture ran: as the
// adapter named it and as it ran locally.
func (f *Fixture) Argv() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.argv)
}

// Connections is the number of connections the server accepted.
func (f *Fixture) Connections() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.conns
}

// Tokens returns every envd access token the fixture minted.
func (f *Fixture) Tokens() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.tokens)
}

// Sensitive lists what must never appear in an adapter's error: the
// endpoint, the keys, the envd tokens, the sandbox ids and E2B's text.
func (f *Fixture) Sensitive() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, _ := url.Parse(f.URL)
	out := []string{f.URL, u.Host, nativeDetail}
	for k := range f.keys {
		out = append(out, k)
	}
	for k := range f.revoked {
		out = append(out, k)
	}
	out = append(out, f.tokens...)
	for id := range f.sandboxes {
		out = append(out, id)
	}
	return append(out, f.gone...)
}

// Sandboxes returns every live sandbox.
func (f *Fixture) Sandboxes() []Sandbox {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Sandbox, 0, len(f.sandboxes))
	for _, s := range f.sandboxes {
		c := s.Sandbox
		c.Metadata = cloneMap(s.Metadata)
		c.Processes = len(s.procs)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Pause marks a sandbox paused, as E2B shows one (its processes stay).
func (f *Fixture) Pause(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.sandboxes[id]; ok {
		s.State = "paused"
	}
}

// PlantOwned creates a sandbox for team with the given metadata, as
// another Create (or another Berth) would have: for paging and duplicate
// tests.
func (f *Fixture) PlantOwned(team string, meta map[string]string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.newSandbox(team, Template, cloneMap(meta), time.Hour).ID
}

// newSandbox creates a sandbox record and its directories; f.mu held.
func (f *Fixture) newSandbox(team, template string, meta map[string]string, timeout time.Duration) *sandboxState {
	id := "i" + randomAlnum(20)
	dir := filepath.Join(f.root, id)
	_ = os.MkdirAll(filepath.Join(dir, "home", "runtime"), 0o700)
	_ = os.MkdirAll(filepath.Join(dir, "workspace"), 0o755)
	token := "envd-" + randomHex(16)
	f.tokens = append(f.tokens, token)
	s := &sandboxState{
		Sandbox: Sandbox{ID: id, Team: team, Template: template, Metadata: meta, State: "running",
			StartedAt: f.clock, EndAt: f.clock.Add(timeout), Dir: dir},
		token: token,
		procs: map[int]*proc{},
	}
	// Distinct start times keep the listing's order stable.
	f.clock = f.clock.Add(time.Millisecond)
	f.sandboxes[id] = s
	return s
}

// remove kills a sandbox's processes and removes its files.
func (f *Fixture) remove(id string) bool {
	f.mu.Lock()
	s, ok := f.sandboxes[id]
	var procs []*proc
	if ok {
		delete(f.sandboxes, id)
		f.gone = append(f.gone, id)
		for _, p := range s.procs {
			procs = append(procs, p)
		}
	}
	f.mu.Unlock()
	if !ok {
		return false
	}
	for _, p := range procs {
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	}
	for _, p := range procs {
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
	}
	_ = os.RemoveAll(s.Dir)
	return true
}

// record notes one call.
func (f *Fixture) record(name string, mutating bool, r *http.Request, team, allocation string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, contracttest.NativeCall{Name: name, Mutating: mutating})
	f.requests = append(f.requests, Request{Call: name, Method: r.Method, Path: r.URL.Path, Team: team, Allocation: allocation})
}

// response is what a performed call answers.
type response struct {
	status int
	body   any
	header map[string]string
	stream func(w http.ResponseWriter, r *http.Request)
	// discard, for a stream, drops its events when it is never served.
	discard func()
}

// exec runs one call under its armed fault, if any.
func (f *Fixture) exec(w http.ResponseWriter, r *http.Request, name string, perform func() response) {
	a := f.take(name)
	if a != nil {
		switch a.fault {
		case contracttest.FaultTransport:
			drop(w)
			return
		case contracttest.FaultCancelAfterDispatch:
			discard(perform())
			if a.cancel != nil {
				a.cancel()
			}
			select {
			case <-r.Context().Done():
			case <-time.After(200 * time.Millisecond):
			}
			drop(w)
			return
		case FaultLostAnswer:
			discard(perform())
			drop(w)
			return
		case contracttest.FaultCleanupFailure, Fault500:
			writeError(w, 500)
			return
		case FaultCommit500:
			discard(perform())
			writeError(w, 500)
			return
		case FaultRateLimit:
			w.Header().Set("Retry-After", "1")
			writeError(w, 429)
			return
		case faultStatus:
			writeError(w, a.status)
			return
		case FaultHang:
			select {
			case <-r.Context().Done():
				return
			case <-a.release:
			}
		}
	}
	resp := perform()
	if resp.stream != nil {
		resp.stream(w, r)
		return
	}
	for k, v := range resp.header {
		w.Header().Set(k, v)
	}
	if resp.status >= 400 {
		writeError(w, resp.status)
		return
	}
	if resp.body == nil {
		w.WriteHeader(resp.status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.status)
	_ = json.NewEncoder(w).Encode(resp.body)
}

func discard(r response) {
	if r.discard != nil {
		r.discard()
	}
}

// drop closes the connection without an answer.
func drop(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

func writeError(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"code": status, "message": nativeDetail + ": status " + strconv.Itoa(status)})
}

func (f *Fixture) serve(w http.ResponseWriter, r *http.Request) {
	f.expire()
	if strings.HasPrefix(r.URL.Path, "/process.Process/") {
		f.serveEnvd(w, r)
		return
	}
	f.serveAPI(w, r)
}

// serveAPI is the control plane.
func (f *Fixture) serveAPI(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	team, authed := f.keys[r.Header.Get("X-Api-Key")]
	f.mu.Unlock()
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var name, allocation string
	var mutating bool
	var handler func() response
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v2/sandboxes":
		name, mutating = "create", true
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		var meta struct {
			Metadata map[string]string `json:"metadata"`
		}
		_ = json.Unmarshal(body, &meta)
		allocation = meta.Metadata["berth_allocation"]
		handler = func() response { return f.create(team, body) }
	case r.Method == http.MethodGet && r.URL.Path == "/v2/sandboxes":
		name = "list"
		handler = func() response { return f.list(team, r.URL.Query()) }
	case r.Method == http.MethodGet && len(parts) == 2 && parts[0] == "sandboxes":
		name = "get"
		handler = func() response { return f.get(team, parts[1]) }
	case r.Method == http.MethodPost && len(parts) == 3 && parts[0] == "sandboxes" && parts[2] == "timeout":
		name, mutating = "timeout", true
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		handler = func() response { return f.setTimeout(team, parts[1], body) }
	case r.Method == http.MethodDelete && len(parts) == 2 && parts[0] == "sandboxes":
		name, mutating = "kill", true
		handler = func() response { return f.kill(team, parts[1]) }
	default:
		// connect, resume, pause and anything else: recorded, refused.
		f.record("unexpected:"+r.Method+" "+r.URL.Path, true, r, team, "")
		writeError(w, 404)
		return
	}
	f.record(name, mutating, r, team, allocation)
	if !authed {
		writeError(w, 401)
		return
	}
	f.exec(w, r, name, handler)
}

func (f *Fixture) create(team string, body []byte) response {
	var req struct {
		TemplateID string            `json:"templateID"`
		Timeout    int64             `json:"timeout"`
		Metadata   map[string]string `json:"metadata"`
		AutoPause  bool              `json:"autoPause"`
	}
	if json.Unmarshal(body, &req) != nil || req.Timeout <= 0 || req.AutoPause {
		return response{status: 400}
	}
	if req.TemplateID != Template {
		return response{status: 404}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	timeout := min(time.Duration(req.Timeout)*time.Second, f.MaxLength)
	s := f.newSandbox(team, req.TemplateID, cloneMap(req.Metadata), timeout)
	return response{status: 201, body: map[string]any{
		"sandboxID": s.ID, "templateID": s.Template, "clientID": "fixture", "envdVersion": "0.6.13",
		"envdAccessToken": s.token, "domain": nil,
	}}
}

func (f *Fixture) detail(s *sandboxState, token bool) map[string]any {
	out := map[string]any{
		"sandboxID": s.ID, "templateID": s.Template, "clientID": "fixture", "metadata": s.Metadata,
		"state": s.State, "startedAt": s.StartedAt, "endAt": s.EndAt, "cpuCount": 2, "memoryMB": 1024,
		"diskSizeMB": 4096, "envdVersion": "0.6.13",
	}
	if token {
		out["envdAccessToken"] = s.token
		out["domain"] = nil
	}
	return out
}

// parseMetadata is E2B's metadata filter parsing (docs/e2b-receipts.md
// §1.4): unescape once, split on & and =, unescape each part again.
func parseMetadata(raw string) (map[string]string, bool) {
	out := map[string]string{}
	if raw == "" {
		return out, true
	}
	once, err := url.QueryUnescape(raw)
	if err != nil {
		return nil, false
	}
	for _, pair := range strings.Split(once, "&") {
		kv := strings.Split(pair, "=")
		if len(kv) != 2 {
			return nil, false
		}
		k, err1 := url.QueryUnescape(kv[0])
		v, err2 := url.QueryUnescape(kv[1])
		if err1 != nil || err2 != nil {
			return nil, false
		}
		out[k] = v
	}
	return out, true
}

func (f *Fixture) list(team string, q url.Values) response {
	meta, ok := parseMetadata(q.Get("metadata"))
	if !ok {
		return response{status: 400}
	}
	states := []string{"running", "paused"}
	if s := q.Get("state"); s != "" {
		states = strings.Split(s, ",")
	}
	limit := 100
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 100 {
			return response{status: 400}
		}
		limit = n
	}
	offset := 0
	if tok := q.Get("nextToken"); tok != "" {
		raw, err := base64.RawURLEncoding.DecodeString(tok)
		n, err2 := strconv.Atoi(string(raw))
		if err != nil || err2 != nil || n < 0 {
			return response{status: 400}
		}
		offset = n
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var match []*sandboxState
	for _, s := range f.sandboxes {
		if s.Team != team || !slices.Contains(states, s.State) {
			continue
		}
		all := true
		for k, v := range meta {
			if s.Metadata[k] != v {
				all = false
			}
		}
		if all {
			match = append(match, s)
		}
	}
	sort.Slice(match, func(i, j int) bool {
		if !match[i].StartedAt.Equal(match[j].StartedAt) {
			return match[i].StartedAt.After(match[j].StartedAt)
		}
		return match[i].ID < match[j].ID
	})
	page := []map[string]any{}
	for i := offset; i < len(match) && i < offset+limit; i++ {
		page = append(page, f.detail(match[i], false))
	}
	hdr := map[string]string{"X-Total-Running": strconv.Itoa(len(match))}
	if offset+limit < len(match) {
		hdr["X-Next-Token"] = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(offset + limit)))
	}
	return response{status: 200, body: page, header: hdr}
}

func (f *Fixture) get(team, id string) response {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sandboxes[id]
	if !ok || s.Team != team {
		return response{status: 404}
	}
	return response{status: 200, body: f.detail(s, true)}
}

func (f *Fixture) setTimeout(team, id string, body []byte) response {
	var req struct {
		Timeout int64 `json:"timeout"`
	}
	if json.Unmarshal(body, &req) != nil {
		return response{status: 400}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sandboxes[id]
	switch {
	case !ok || s.Team != team:
		return response{status: 404}
	case s.State != "running":
		return response{status: 409}
	}
	end := f.clock.Add(time.Duration(max(req.Timeout, 0)) * time.Second)
	if limit := s.StartedAt.Add(f.MaxLength); end.After(limit) {
		end = limit
	}
	s.EndAt = end
	return response{status: 204}
}

func (f *Fixture) kill(team, id string) response {
	f.mu.Lock()
	s, ok := f.sandboxes[id]
	f.mu.Unlock()
	if !ok || s.Team != team {
		return response{status: 404}
	}
	f.remove(id)
	return response{status: 204}
}

// serveEnvd is envd's process service, routed by E2b-Sandbox-Id.
func (f *Fixture) serveEnvd(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/process.Process/")
	names := map[string]string{"Start": "start", "SendInput": "input", "CloseStdin": "close_stdin",
		"SendSignal": "signal", "List": "processes"}
	name, known := names[method]
	if !known {
		f.record("unexpected:envd "+method, true, r, "", "")
		writeError(w, 404)
		return
	}
	f.record(name, name != "processes", r, "", "")
	f.mu.Lock()
	s, ok := f.sandboxes[r.Header.Get("E2b-Sandbox-Id")]
	authed := ok && r.Header.Get("X-Access-Token") == s.token && r.Header.Get("E2b-Sandbox-Port") == "49983"
	paused := ok && s.State != "running"
	f.mu.Unlock()
	switch {
	case !ok:
		writeError(w, 502)
		return
	case !authed:
		writeError(w, 401)
		return
	case paused:
		// Never resumed by traffic (the adapter creates with autoResume off).
		writeError(w, 502)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		writeError(w, 400)
		return
	}
	switch method {
	case "Start":
		f.exec(w, r, name, func() response { return f.start(s, r, body) })
	case "SendInput":
		f.exec(w, r, name, func() response { return f.sendInput(s, body) })
	case "CloseStdin":
		f.exec(w, r, name, func() response { return f.closeStdin(s, body) })
	case "SendSignal":
		f.exec(w, r, name, func() response { return f.signal(s, body) })
	case "List":
		f.exec(w, r, name, func() response { return f.processes(s) })
	}
}

type selector struct {
	Process struct {
		Pid int    `json:"pid"`
		Tag string `json:"tag"`
	} `json:"process"`
}

func (f *Fixture) find(s *sandboxState, body []byte) *proc {
	var sel selector
	if json.Unmarshal(body, &sel) != nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range s.procs {
		if (sel.Process.Pid != 0 && p.pid == sel.Process.Pid) || (sel.Process.Tag != "" && p.tag == sel.Process.Tag) {
			return p
		}
	}
	return nil
}

func (f *Fixture) start(s *sandboxState, r *http.Request, body []byte) response {
	if len(body) < 5 || r.Header.Get("Content-Type") != "application/connect+json" ||
		int(binary.BigEndian.Uint32(body[1:5])) != len(body)-5 {
		return response{status: 400}
	}
	var req struct {
		Process struct {
			Cmd  string            `json:"cmd"`
			Args []string          `json:"args"`
			Envs map[string]string `json:"envs"`
			Cwd  string            `json:"cwd"`
		} `json:"process"`
		Tag   string `json:"tag"`
		Stdin bool   `json:"stdin"`
	}
	if json.Unmarshal(body[5:], &req) != nil || req.Process.Cmd == "" {
		return response{status: 400}
	}
	argv := append([]string{req.Process.Cmd}, req.Process.Args...)
	f.mu.Lock()
	runner := f.Runner
	f.mu.Unlock()
	local := runner(s.Dir, argv)
	cmd := exec.Command(local[0], local[1:]...)
	cmd.Dir = filepath.Join(s.Dir, "home", "runtime")
	if req.Process.Cwd != "" {
		cmd.Dir = MapPath(s.Dir, req.Process.Cwd)
	}
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + filepath.Join(s.Dir, "home", "runtime")}
	for k, v := range req.Process.Envs {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stdin io.WriteCloser
	if req.Stdin {
		stdin, _ = cmd.StdinPipe()
	}
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	f.mu.Lock()
	f.argv = append(f.argv, argv, local)
	f.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return response{status: 400}
	}
	p := &proc{pid: cmd.Process.Pid, tag: req.Tag, argv: argv, cmd: cmd, stdin: stdin,
		events: make(chan event, 1024), done: make(chan struct{})}
	if ms, err := strconv.ParseInt(r.Header.Get("Connect-Timeout-Ms"), 10, 64); err == nil && ms > 0 {
		p.timer = time.AfterFunc(time.Duration(ms)*time.Millisecond, func() { _ = syscall.Kill(-p.pid, syscall.SIGKILL) })
	}
	f.mu.Lock()
	s.procs[p.pid] = p
	f.mu.Unlock()
	p.events <- event{"start": map[string]any{"pid": p.pid}}
	go f.pump(s, p, stdout, stderr)
	return response{stream: func(w http.ResponseWriter, r *http.Request) { serveStream(w, r, p) }, discard: p.discard}
}

// pump turns the process's output into data events, in arrival order,
// then its exit into the end event.
func (f *Fixture) pump(s *sandboxState, p *proc, stdout, stderr io.Reader) {
	var wg sync.WaitGroup
	read := func(r io.Reader, field string) {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				p.events <- event{"data": map[string]any{field: slices.Clone(buf[:n])}}
			}
			if err != nil {
				return
			}
		}
	}
	wg.Add(2)
	go read(stdout, "stdout")
	go read(stderr, "stderr")
	wg.Wait()
	err := p.cmd.Wait()
	if p.timer != nil {
		p.timer.Stop()
	}
	st := p.cmd.ProcessState
	end := map[string]any{"exitCode": st.ExitCode(), "exited": st.Exited(), "status": st.String()}
	if err != nil && st == nil {
		end["error"] = "wait failed"
	}
	p.events <- event{"end": end}
	close(p.events)
	f.mu.Lock()
	delete(s.procs, p.pid)
	f.mu.Unlock()
	close(p.done)
}

// serveStream writes a process's events as Connect envelopes until its
// end; a client that leaves does not stop the process (envd's rule), the
// rest of its events are drained.
func serveStream(w http.ResponseWriter, r *http.Request, p *proc) {
	w.Header().Set("Content-Type", "application/connect+json")
	w.WriteHeader(200)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	for {
		select {
		case ev, ok := <-p.events:
			if !ok {
				_ = writeEnvelope(w, 2, map[string]any{})
				if flusher != nil {
					flusher.Flush()
				}
				return
			}
			if writeEnvelope(w, 0, map[string]any{"event": ev}) != nil {
				p.discard()
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		case <-r.Context().Done():
			p.discard()
			return
		}
	}
}

// discard drains the rest of p's events, so the process never blocks on
// output nobody reads.
func (p *proc) discard() {
	go func() {
		for range p.events {
		}
	}()
}

func writeEnvelope(w io.Writer, flag byte, msg any) error {
	data, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	head := make([]byte, 5)
	head[0] = flag
	binary.BigEndian.PutUint32(head[1:], uint32(len(data)))
	if _, err := w.Write(head); err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

func (f *Fixture) sendInput(s *sandboxState, body []byte) response {
	p := f.find(s, body)
	var req struct {
		Input struct {
			Stdin []byte `json:"stdin"`
		} `json:"input"`
	}
	if p == nil || p.stdin == nil || json.Unmarshal(body, &req) != nil {
		return response{status: 404}
	}
	if _, err := p.stdin.Write(req.Input.Stdin); err != nil {
		return response{status: 400}
	}
	return response{status: 200, body: map[string]any{}}
}

func (f *Fixture) closeStdin(s *sandboxState, body []byte) response {
	p := f.find(s, body)
	if p == nil || p.stdin == nil {
		return response{status: 404}
	}
	_ = p.stdin.Close()
	return response{status: 200, body: map[string]any{}}
}

func (f *Fixture) signal(s *sandboxState, body []byte) response {
	p := f.find(s, body)
	var req struct {
		Signal string `json:"signal"`
	}
	if p == nil || json.Unmarshal(body, &req) != nil {
		return response{status: 404}
	}
	sig := syscall.SIGTERM
	if req.Signal == "SIGNAL_SIGKILL" {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-p.pid, sig)
	return response{status: 200, body: map[string]any{}}
}

func (f *Fixture) processes(s *sandboxState) response {
	f.mu.Lock()
	defer f.mu.Unlock()
	list := []map[string]any{}
	for _, p := range s.procs {
		list = append(list, map[string]any{"pid": p.pid, "tag": p.tag,
			"config": map[string]any{"cmd": p.argv[0], "args": p.argv[1:]}})
	}
	return response{status: 200, body: map[string]any{"processes": list}}
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func randomAlnum(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
