package e2b

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"berth.dev/sandbox"
)

// The wire bounds.
const (
	// maxBody bounds a control-plane answer (a list page of 100 sandboxes
	// is far below it).
	maxBody = 1 << 20
	// maxFrame bounds one Connect envelope of envd's stream.
	maxFrame = 4 << 20
	// EnvdPort is envd's port in every sandbox.
	EnvdPort = 49983
	// RuntimeUser is the process user envd runs the adapter's processes
	// as: the template's Runtime user (deploy/e2b), uid 1000 like the
	// runtime image's.
	RuntimeUser = "runtime"
	// pageLimit is E2B's largest list page.
	pageLimit = 100
	// maxPages bounds a listing by metadata (it should find one sandbox).
	maxPages = 20
)

// idPattern is what the adapter accepts as a sandbox id: a short token
// of [a-z0-9] (E2B mints "i" + 20 of them; the length is not promised).
var idPattern = regexp.MustCompile(`^[a-z0-9]{1,64}$`)

// apiError is a complete answer with a status the call does not accept.
// It carries the status only: E2B's body is never read into an error.
type apiError struct{ status int }

func (e *apiError) Error() string { return "e2b: answered status " + strconv.Itoa(e.status) }

// transportError is a call without a complete answer. written is false
// only when the trace proves that no byte of the request was written
// (no headers, no request written): E2B never saw it.
type transportError struct {
	written bool
	err     error
}

func (e *transportError) Error() string { return "e2b: no complete answer" }
func (e *transportError) Unwrap() error { return e.err }

// statusOf is the status of a complete refusal, 0 otherwise.
func statusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.status
	}
	return 0
}

// notWritten reports whether err proves the request never left.
func notWritten(err error) bool {
	var te *transportError
	return errors.As(err, &te) && !te.written
}

// client speaks E2B's control plane (REST, JSON, X-API-Key) and envd's
// process service (Connect, JSON codec) with net/http: one connection per
// request (no reuse, so the transport never resends anything), no
// redirects, no proxy from the environment, bounded answers.
type client struct {
	api        string
	sandboxURL string
	key        sandbox.Credential
	hc         *http.Client
}

func newClient(apiURL, sandboxURL string, key sandbox.Credential) *client {
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    10 * time.Second,
		DisableKeepAlives:      true,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &client{
		api:        apiURL,
		sandboxURL: sandboxURL,
		key:        key,
		hc: &http.Client{
			Transport:     tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

// withKey returns a client of the same endpoints with another key.
func (c *client) withKey(key sandbox.Credential) *client {
	out := *c
	out.key = key
	return &out
}

// send performs req once and returns its answer, or a transportError
// that says whether any of the request was written.
func (c *client) send(req *http.Request) (*http.Response, error) {
	var wrote atomic.Bool
	trace := &httptrace.ClientTrace{
		WroteHeaders: func() { wrote.Store(true) },
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) },
	}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, &transportError{written: wrote.Load(), err: err}
	}
	return resp, nil
}

// call is one control-plane request: in marshalled as the JSON body (nil:
// none), a 2xx answer decoded into out (nil: ignored), any other status an
// apiError. The answer's headers are returned for paging.
func (c *client) call(ctx context.Context, method, path string, query url.Values, in, out any) (http.Header, error) {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return nil, &transportError{err: err}
		}
		body = bytes.NewReader(data)
	}
	u := c.api + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, &transportError{err: err}
	}
	req.Header.Set("X-API-Key", string(c.key.Reveal()))
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.send(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil || len(data) > maxBody {
		return nil, &transportError{written: true, err: errors.New("answer unreadable or too large")}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &apiError{status: resp.StatusCode}
	}
	if out != nil && json.Unmarshal(data, out) != nil {
		return nil, &transportError{written: true, err: errors.New("answer malformed")}
	}
	return resp.Header, nil
}

// sandboxJSON is E2B's Sandbox, ListedSandbox and SandboxDetail in one:
// the fields the adapter reads.
type sandboxJSON struct {
	SandboxID       string            `json:"sandboxID"`
	TemplateID      string            `json:"templateID"`
	Metadata        map[string]string `json:"metadata"`
	State           string            `json:"state"`
	EndAt           time.Time         `json:"endAt"`
	EnvdVersion     string            `json:"envdVersion"`
	EnvdAccessToken string            `json:"envdAccessToken"`
	Domain          *string           `json:"domain"`
}

// newSandboxJSON is E2B's NewSandboxV2 as the adapter sends it.
type newSandboxJSON struct {
	TemplateID string            `json:"templateID"`
	Timeout    int64             `json:"timeout"`
	Metadata   map[string]string `json:"metadata"`
	EnvVars    map[string]string `json:"envVars"`
	AutoPause  bool              `json:"autoPause"`
	AutoResume autoResumeJSON    `json:"autoResume"`
	AllowInet  bool              `json:"allow_internet_access"`
}

type autoResumeJSON struct {
	Enabled bool `json:"enabled"`
}

// create is POST /v2/sandboxes: once, never resent.
func (c *client) create(ctx context.Context, template string, lease time.Duration, meta map[string]string) (sandboxJSON, error) {
	var out sandboxJSON
	_, err := c.call(ctx, http.MethodPost, "/v2/sandboxes", nil, newSandboxJSON{
		TemplateID: template,
		Timeout:    int64(lease / time.Second),
		Metadata:   meta,
		EnvVars:    map[string]string{},
		AutoPause:  false,
		AutoResume: autoResumeJSON{Enabled: false},
		AllowInet:  true,
	}, &out)
	return out, err
}

// get is GET /sandboxes/{id}.
func (c *client) get(ctx context.Context, id string) (sandboxJSON, error) {
	var out sandboxJSON
	_, err := c.call(ctx, http.MethodGet, "/sandboxes/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

// list is GET /v2/sandboxes filtered by meta (every pair equal), both
// states, every page. Keys and values are [a-z0-9_-] (UUIDs), so E2B's
// double decoding needs no escaping beyond the query's own.
func (c *client) list(ctx context.Context, meta map[string]string, limit int) ([]sandboxJSON, error) {
	pairs := make([]string, 0, len(meta))
	for k, v := range meta {
		pairs = append(pairs, k+"="+v)
	}
	slices.Sort(pairs)
	var all []sandboxJSON
	next := ""
	for page := 0; page < maxPages; page++ {
		q := url.Values{}
		q.Set("metadata", strings.Join(pairs, "&"))
		q.Set("state", "running,paused")
		q.Set("limit", strconv.Itoa(limit))
		if next != "" {
			q.Set("nextToken", next)
		}
		var out []sandboxJSON
		hdr, err := c.call(ctx, http.MethodGet, "/v2/sandboxes", q, nil, &out)
		if err != nil {
			return nil, err
		}
		all = append(all, out...)
		next = hdr.Get("X-Next-Token")
		if next == "" || limit < pageLimit {
			return all, nil
		}
	}
	return nil, &transportError{written: true, err: errors.New("listing too long")}
}

// setTimeout is POST /sandboxes/{id}/timeout: endAt = now + lease.
func (c *client) setTimeout(ctx context.Context, id string, lease time.Duration) error {
	_, err := c.call(ctx, http.MethodPost, "/sandboxes/"+url.PathEscape(id)+"/timeout", nil,
		map[string]int64{"timeout": int64(lease / time.Second)}, nil)
	return err
}

// kill is DELETE /sandboxes/{id}.
func (c *client) kill(ctx context.Context, id string) error {
	_, err := c.call(ctx, http.MethodDelete, "/sandboxes/"+url.PathEscape(id), nil, nil, nil)
	return err
}

// envd is one sandbox's envd: its URL and per-sandbox access token. The
// token is read from GET /sandboxes/{id} for each operation, never
// persisted, never logged.
type envd struct {
	c     *client
	base  string
	id    string
	token string
}

// envdFor addresses s's envd: the configured sandbox_url (E2B's proxy
// routes on E2b-Sandbox-Id), else https://49983-<id>.<domain>.
func (c *client) envdFor(s sandboxJSON) envd {
	base := c.sandboxURL
	if base == "" {
		domain := DefaultDomain
		if s.Domain != nil && *s.Domain != "" {
			domain = *s.Domain
		}
		base = "https://" + strconv.Itoa(EnvdPort) + "-" + s.SandboxID + "." + domain
	}
	return envd{c: c, base: base, id: s.SandboxID, token: s.EnvdAccessToken}
}

func (e envd) header(req *http.Request, contentType string) {
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set("X-Access-Token", e.token)
	req.Header.Set("E2b-Sandbox-Id", e.id)
	req.Header.Set("E2b-Sandbox-Port", strconv.Itoa(EnvdPort))
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(RuntimeUser+":")))
}

// processJSON is envd's ProcessConfig: an argv, no shell.
type processJSON struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args"`
	Envs map[string]string `json:"envs"`
	Cwd  string            `json:"cwd,omitempty"`
}

type startJSON struct {
	Process processJSON `json:"process"`
	Tag     string      `json:"tag,omitempty"`
	Stdin   bool        `json:"stdin"`
}

// selectorJSON is envd's ProcessSelector: a pid or a tag.
type selectorJSON struct {
	Pid uint32 `json:"pid,omitempty"`
	Tag string `json:"tag,omitempty"`
}

// eventJSON is one StartResponse.
type eventJSON struct {
	Event struct {
		Start *struct {
			Pid uint32 `json:"pid"`
		} `json:"start"`
		Data *struct {
			Stdout []byte `json:"stdout"`
			Stderr []byte `json:"stderr"`
		} `json:"data"`
		End *struct {
			ExitCode int32  `json:"exitCode"`
			Exited   bool   `json:"exited"`
			Status   string `json:"status"`
		} `json:"end"`
		Keepalive *struct{} `json:"keepalive"`
	} `json:"event"`
}

// errStreamEnded is a stream that ended (or failed) without the
// process's end event.
var errStreamEnded = errors.New("e2b: envd stream ended without an end event")

// stream is an open process.Process/Start answer.
type stream struct {
	body   io.ReadCloser
	cancel context.CancelFunc
}

// start opens process.Process/Start. lifetime, when positive, is the
// process's lifetime in envd (Connect-Timeout-Ms); zero: none. The
// stream ends with ctx or close.
func (e envd) start(ctx context.Context, req startJSON, lifetime time.Duration) (*stream, error) {
	msg, err := json.Marshal(req)
	if err != nil {
		return nil, &transportError{err: err}
	}
	frame := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
	frame = append(frame, msg...)
	sctx, cancel := context.WithCancel(ctx)
	hreq, err := http.NewRequestWithContext(sctx, http.MethodPost, e.base+"/process.Process/Start", bytes.NewReader(frame))
	if err != nil {
		cancel()
		return nil, &transportError{err: err}
	}
	e.header(hreq, "application/connect+json")
	hreq.Header.Set("Keepalive-Ping-Interval", "50")
	if lifetime > 0 {
		hreq.Header.Set("Connect-Timeout-Ms", strconv.FormatInt(lifetime.Milliseconds(), 10))
	}
	resp, err := e.c.send(hreq)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
		resp.Body.Close()
		cancel()
		return nil, &apiError{status: resp.StatusCode}
	}
	return &stream{body: resp.Body, cancel: cancel}, nil
}

// next reads the stream's next event, skipping keepalives. The
// end-of-stream envelope, a malformed frame or a broken connection is
// errStreamEnded (wrapped): the process's outcome is not proved.
func (s *stream) next() (eventJSON, error) {
	for {
		var head [5]byte
		if _, err := io.ReadFull(s.body, head[:]); err != nil {
			return eventJSON{}, errStreamEnded
		}
		n := binary.BigEndian.Uint32(head[1:])
		if n > maxFrame {
			return eventJSON{}, errStreamEnded
		}
		data := make([]byte, n)
		if _, err := io.ReadFull(s.body, data); err != nil {
			return eventJSON{}, errStreamEnded
		}
		if head[0]&0x02 != 0 {
			return eventJSON{}, errStreamEnded
		}
		var ev eventJSON
		if json.Unmarshal(data, &ev) != nil {
			return eventJSON{}, errStreamEnded
		}
		if ev.Event.Keepalive != nil {
			continue
		}
		return ev, nil
	}
}

// close ends the stream; the process goes on in envd.
func (s *stream) close() {
	s.cancel()
	s.body.Close()
}

// unary is one unary Connect call with the JSON codec.
func (e envd) unary(ctx context.Context, method string, in, out any) error {
	msg, err := json.Marshal(in)
	if err != nil {
		return &transportError{err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/process.Process/"+method, bytes.NewReader(msg))
	if err != nil {
		return &transportError{err: err}
	}
	e.header(req, "application/json")
	resp, err := e.c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil || len(data) > maxBody {
		return &transportError{written: true, err: errors.New("answer unreadable or too large")}
	}
	if resp.StatusCode != http.StatusOK {
		return &apiError{status: resp.StatusCode}
	}
	if out != nil && json.Unmarshal(data, out) != nil {
		return &transportError{written: true, err: errors.New("answer malformed")}
	}
	return nil
}

// sendInput is process.Process/SendInput: stdin bytes, in order.
func (e envd) sendInput(ctx context.Context, sel selectorJSON, data []byte) error {
	return e.unary(ctx, "SendInput", map[string]any{
		"process": sel, "input": map[string][]byte{"stdin": data},
	}, nil)
}

// closeStdin is process.Process/CloseStdin: EOF on stdin.
func (e envd) closeStdin(ctx context.Context, sel selectorJSON) error {
	return e.unary(ctx, "CloseStdin", map[string]any{"process": sel}, nil)
}

// sigkill is process.Process/SendSignal with SIGKILL.
func (e envd) sigkill(ctx context.Context, sel selectorJSON) error {
	return e.unary(ctx, "SendSignal", map[string]any{"process": sel, "signal": "SIGNAL_SIGKILL"}, nil)
}

// processesJSON is process.Process/List's answer.
type processesJSON struct {
	Processes []struct {
		Pid uint32 `json:"pid"`
		Tag string `json:"tag"`
	} `json:"processes"`
}

// running reports whether a process tagged tag runs (process.Process/List).
func (e envd) running(ctx context.Context, tag string) (bool, error) {
	var out processesJSON
	if err := e.unary(ctx, "List", map[string]any{}, &out); err != nil {
		return false, err
	}
	for _, p := range out.Processes {
		if p.Tag == tag {
			return true, nil
		}
	}
	return false, nil
}
