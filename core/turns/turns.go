package turns

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"path"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"berth.dev/core/events"
	"berth.dev/core/projects"
	"berth.dev/core/secrets"
	"berth.dev/core/store"
	"berth.dev/sandbox/errdefs"
)

// Store is what Turns read and write: the owner-bound store, because
// claims and sweeps are fenced by the owner epoch.
type Store interface {
	projects.SessionReader
	SubmitTurn(ctx context.Context, p store.SubmitTurnParams) (t store.Turn, created bool, err error)
	GetTurn(ctx context.Context, id uuid.UUID) (store.Turn, error)
	ListTurns(ctx context.Context, sessionID uuid.UUID, afterSeq int64, limit int) ([]store.Turn, error)
	RequestTurnCancel(ctx context.Context, id uuid.UUID) (store.Turn, error)
	ReadTurnOutput(ctx context.Context, id uuid.UUID, afterSeq int64, limit int) ([]store.OutputChunk, error)
	ClaimNextTurn(ctx context.Context, c store.RuntimeConn) (t store.Turn, ok bool, err error)
	MarkTurnStarted(ctx context.Context, id uuid.UUID, c store.RuntimeConn) (store.Turn, error)
	AppendTurnOutput(ctx context.Context, id uuid.UUID, c store.RuntimeConn, stream int16, offset int64, data []byte) error
	FinishTurn(ctx context.Context, id uuid.UUID, c store.RuntimeConn, r store.TurnResult) (store.Turn, error)
	ExpireQueuedTurns(ctx context.Context) ([]store.TurnRef, error)
	UnconfirmOrphanedTurns(ctx context.Context) ([]store.TurnRef, error)
	EndTurnsOnLostCompute(ctx context.Context) ([]store.TurnRef, error)
	// A Runtime connection's start and end unconfirm the Turns that ran
	// on the connection it ends (runtime.go).
	AcceptRuntime(ctx context.Context, p store.AcceptRuntimeParams) (store.RuntimeGrant, error)
	CloseRuntimeConnection(ctx context.Context, c store.RuntimeConn) ([]uuid.UUID, error)
}

// Writes lists the store methods this package alone calls: every write
// of Turn state, including a Runtime connection's start and end, which
// unconfirm the Turns that ran on the connection they end. The one-writer
// test (writers_test.go) fails when another package of the core module
// calls one.
var Writes = []string{
	"SubmitTurn", "RequestTurnCancel", "ClaimNextTurn", "MarkTurnStarted", "AppendTurnOutput", "FinishTurn",
	"ExpireQueuedTurns", "UnconfirmOrphanedTurns", "EndTurnsOnLostCompute", "AcceptRuntime", "CloseRuntimeConnection",
}

// Bounds and defaults of a Turn.
const (
	DefaultTimeout      = 10 * time.Minute
	MaxTimeout          = 24 * time.Hour
	DefaultQueueTimeout = 5 * time.Minute
	MaxQueueTimeout     = time.Hour
	// MaxOutputBytes bounds each recorded output stream.
	MaxOutputBytes = 1 << 20
	MaxStdinBytes  = 1 << 20
	MaxArgs        = 1024
	MaxArgBytes    = 64 << 10
	MaxScriptBytes = 256 << 10
	MaxEnv         = 256
	MaxEnvBytes    = 64 << 10
	// WorkspaceRoot is where working directories must be.
	WorkspaceRoot = "/workspace"
	// ReservedEnvPrefix marks environment names Berth keeps for itself.
	ReservedEnvPrefix = "BERTH_"
	// sweepInterval is how often the sweeper runs.
	sweepInterval = time.Second
)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Command is what a Turn runs: exactly one of Argv and Script.
type Command struct {
	Argv   []string
	Script *string
}

// SubmitRequest is a Turn to queue.
type SubmitRequest struct {
	SessionID        uuid.UUID
	RequestID        uuid.UUID
	Command          Command
	WorkingDirectory string
	Env              map[string]string
	Stdin            []byte
	// Timeout and QueueTimeout: zero means the default.
	Timeout      time.Duration
	QueueTimeout time.Duration
}

// Input is a Turn's sealed part.
type Input struct {
	Env   map[string]string `json:"env,omitempty"`
	Stdin []byte            `json:"stdin,omitempty"`
}

// Service is the Turn logic.
type Service struct {
	store        Store
	key          secrets.Key
	installation uuid.UUID
	newID        func() uuid.UUID
	bus          *events.Bus
	// digestMAC is an HMAC under the request digest key; the key is held
	// only inside the func, which no printer shows.
	digestMAC func() hash.Hash
}

// New returns a Service. key seals Turn input, bound to installation;
// newID makes Turn ids; bus carries each committed change of a Turn or a
// Session's queue (events.Turn, events.Session) to the gateway and the
// output streams, and wakes the streams.
func New(st Store, key secrets.Key, installation uuid.UUID, newID func() uuid.UUID, bus *events.Bus) *Service {
	digestKey := key.Derive("turn-request-digest")
	return &Service{store: st, key: key, installation: installation, newID: newID, bus: bus,
		digestMAC: func() hash.Hash { return hmac.New(sha256.New, digestKey) }}
}

// Validate checks r and fills in its defaults. Every error is an
// errdefs.FieldError naming the admin API field.
func (r *SubmitRequest) Validate() error {
	switch {
	case r.SessionID == uuid.Nil:
		return errdefs.Invalid("session_id", "must name a Session")
	case r.RequestID == uuid.Nil:
		return errdefs.Invalid("request_id", "must be a UUID")
	}
	if err := r.Command.validate(); err != nil {
		return err
	}
	if r.WorkingDirectory == "" {
		r.WorkingDirectory = WorkspaceRoot
	}
	wd := r.WorkingDirectory
	if len(wd) > 4096 || !cleanText(wd) || !path.IsAbs(wd) || path.Clean(wd) != wd ||
		(wd != WorkspaceRoot && !strings.HasPrefix(wd, WorkspaceRoot+"/")) {
		return errdefs.Invalid("working_directory", "must be a clean absolute path under /workspace")
	}
	if err := validateEnv(r.Env); err != nil {
		return err
	}
	if len(r.Stdin) > MaxStdinBytes {
		return errdefs.Invalid("stdin", "at most 1 MiB")
	}
	switch {
	case r.Timeout == 0:
		r.Timeout = DefaultTimeout
	case r.Timeout < time.Second || r.Timeout > MaxTimeout:
		return errdefs.Invalid("timeout", "must be between 1s and 24h")
	}
	switch {
	case r.QueueTimeout == 0:
		r.QueueTimeout = DefaultQueueTimeout
	case r.QueueTimeout < time.Second || r.QueueTimeout > MaxQueueTimeout:
		return errdefs.Invalid("queue_timeout", "must be between 1s and 1h")
	}
	return nil
}

// validate checks that c is exactly one of a bounded argv and a bounded
// script.
func (c Command) validate() error {
	switch {
	case c.Argv != nil && c.Script != nil, c.Argv == nil && c.Script == nil:
		return errdefs.Invalid("command", "exactly one of argv and shell_script")
	case c.Argv != nil:
		if len(c.Argv) == 0 || len(c.Argv) > MaxArgs {
			return errdefs.Invalid("command.argv", fmt.Sprintf("must have 1 to %d arguments", MaxArgs))
		}
		if c.Argv[0] == "" {
			return errdefs.Invalid("command.argv", "the program must not be empty")
		}
		for _, a := range c.Argv {
			if len(a) > MaxArgBytes || !cleanText(a) {
				return errdefs.Invalid("command.argv", "each argument must be UTF-8 without NUL, at most 64 KiB")
			}
		}
	default:
		if *c.Script == "" || len(*c.Script) > MaxScriptBytes || !cleanText(*c.Script) {
			return errdefs.Invalid("command.script", "must be 1 byte to 256 KiB of UTF-8 without NUL")
		}
	}
	return nil
}

// validateEnv checks a Turn's environment: bounded, well-formed names
// outside the reserved prefix, bounded clean values.
func validateEnv(env map[string]string) error {
	if len(env) > MaxEnv {
		return errdefs.Invalid("env", fmt.Sprintf("at most %d variables", MaxEnv))
	}
	for k, v := range env {
		switch {
		case !envName.MatchString(k) || len(k) > 256:
			return errdefs.Invalid("env", "names must match [A-Za-z_][A-Za-z0-9_]*")
		case strings.HasPrefix(strings.ToUpper(k), ReservedEnvPrefix):
			return errdefs.Invalid("env", "names starting with BERTH_ are reserved")
		case len(v) > MaxEnvBytes || !cleanText(v):
			return errdefs.Invalid("env", "values must be UTF-8 without NUL, at most 64 KiB")
		}
	}
	return nil
}

func cleanText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// digest identifies the request's content with an HMAC under a derived
// key, so a stored digest reveals nothing about secret inputs.
func (s *Service) digest(r SubmitRequest) ([]byte, error) {
	canon, err := json.Marshal(struct {
		Session uuid.UUID
		Command Command
		WD      string
		Env     map[string]string
		Stdin   []byte
		Timeout time.Duration
		Queue   time.Duration
	}{r.SessionID, r.Command, r.WorkingDirectory, r.Env, r.Stdin, r.Timeout, r.QueueTimeout})
	if err != nil {
		return nil, err
	}
	m := s.digestMAC()
	m.Write(canon)
	return m.Sum(nil), nil
}

// Submit validates and queues a Turn. A retry with the same request id
// returns the first Turn and queues nothing; with different content it is
// errdefs.ErrExists. A Session being deleted is
// errdefs.ErrFailedPrecondition; one scope does not see is
// errdefs.ErrNotFound.
func (s *Service) Submit(ctx context.Context, scope projects.Scope, r SubmitRequest) (store.Turn, error) {
	if err := r.Validate(); err != nil {
		return store.Turn{}, err
	}
	if err := projects.Visible(ctx, s.store, scope, r.SessionID); err != nil {
		return store.Turn{}, err
	}
	digest, err := s.digest(r)
	if err != nil {
		return store.Turn{}, fmt.Errorf("submit turn: %w", err)
	}
	id := s.newID()
	plain, err := json.Marshal(Input{Env: r.Env, Stdin: r.Stdin})
	if err != nil {
		return store.Turn{}, fmt.Errorf("submit turn: %w", err)
	}
	nonce, ct, err := s.key.Seal(plain, secrets.TurnInput(s.installation, id))
	if err != nil {
		return store.Turn{}, errors.New("submit turn: seal input failed")
	}
	t, _, err := s.store.SubmitTurn(ctx, store.SubmitTurnParams{
		ID: id, SessionID: r.SessionID, RequestID: r.RequestID, RequestDigest: digest,
		Argv: r.Command.Argv, ShellScript: r.Command.Script, WorkingDirectory: r.WorkingDirectory,
		Input: store.SealedCredential{Ciphertext: ct, Nonce: nonce}, Timeout: r.Timeout,
		QueueTimeout: r.QueueTimeout, MaxOutputBytes: MaxOutputBytes,
	})
	if err != nil {
		return store.Turn{}, err
	}
	s.changed(r.SessionID)
	return t, nil
}

// OpenInput returns a Turn's environment and stdin, for the one delivery
// to its Runtime.
func (s *Service) OpenInput(t store.Turn) (Input, error) {
	plain, err := s.key.Open(t.Input.Nonce, t.Input.Ciphertext, secrets.TurnInput(s.installation, t.ID))
	if err != nil {
		return Input{}, errors.New("open turn input failed")
	}
	var in Input
	if err := json.Unmarshal(plain, &in); err != nil {
		return Input{}, errors.New("decode turn input failed")
	}
	return in, nil
}

// Get returns a Turn of the Session; ErrNotFound for a Turn of another
// Session or of a Session scope does not see.
func (s *Service) Get(ctx context.Context, scope projects.Scope, sessionID, turnID uuid.UUID) (store.Turn, error) {
	if err := projects.Visible(ctx, s.store, scope, sessionID); err != nil {
		return store.Turn{}, err
	}
	t, err := s.store.GetTurn(ctx, turnID)
	if err != nil {
		return store.Turn{}, err
	}
	if t.SessionID != sessionID {
		return store.Turn{}, fmt.Errorf("get turn: %w", errdefs.ErrNotFound)
	}
	return t, nil
}

// List returns up to limit (store.ListTurns's bounds) Turns of the
// Session after seq afterSeq; ErrNotFound for a Session scope does not
// see.
func (s *Service) List(ctx context.Context, scope projects.Scope, sessionID uuid.UUID, afterSeq int64, limit int) ([]store.Turn, error) {
	if _, err := projects.GetSession(ctx, s.store, scope, sessionID); err != nil {
		return nil, err
	}
	return s.store.ListTurns(ctx, sessionID, afterSeq, limit)
}

// Cancel requests cancellation: a queued Turn is cancelled at once, a
// running one by its Runtime (the gateway is woken), a terminal one is
// returned unchanged.
func (s *Service) Cancel(ctx context.Context, scope projects.Scope, sessionID, turnID uuid.UUID) (store.Turn, error) {
	if _, err := s.Get(ctx, scope, sessionID, turnID); err != nil {
		return store.Turn{}, err
	}
	t, err := s.store.RequestTurnCancel(ctx, turnID)
	if err != nil {
		return store.Turn{}, err
	}
	s.changed(sessionID, turnID)
	return t, nil
}

// Chunk is a piece of output for a stream reader.
type Chunk struct {
	Stream int16
	Offset int64
	Data   []byte
}

// outputPage is how many chunks one read returns.
const outputPage = 64

// pollInterval bounds how long a waiter relies on the bus alone.
const pollInterval = 500 * time.Millisecond

// StreamOutput sends a Turn's output from the given offsets: what is
// recorded, then what arrives, until the Turn is terminal and everything
// recorded was sent, or ctx ends.
func (s *Service) StreamOutput(ctx context.Context, scope projects.Scope, sessionID, turnID uuid.UUID, stdoutFrom, stderrFrom int64, send func(Chunk) error) error {
	if stdoutFrom < 0 {
		return errdefs.Invalid("stdout_from", "must not be negative")
	}
	if stderrFrom < 0 {
		return errdefs.Invalid("stderr_from", "must not be negative")
	}
	if _, err := s.Get(ctx, scope, sessionID, turnID); err != nil {
		return err
	}
	// Subscribed before the first read: a change committed after any read
	// below wakes the wait that follows it.
	wake := s.bus.Subscribe(events.Event{Kind: events.Turn, ID: turnID})
	defer wake.Close()
	var seq int64
	for {
		// Read the state first: if it is terminal, every chunk is already
		// recorded and the reads below drain them.
		t, err := s.store.GetTurn(ctx, turnID)
		if err != nil {
			return err
		}
		if seq, err = s.sendRecorded(ctx, turnID, seq, stdoutFrom, stderrFrom, send); err != nil {
			return err
		}
		if t.State.Terminal() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake.Ready():
		case <-time.After(pollInterval):
		}
	}
}

// sendRecorded sends Turn turnID's recorded output after chunk seq,
// each stream from its offset, and returns the last chunk's seq.
func (s *Service) sendRecorded(ctx context.Context, turnID uuid.UUID, seq, stdoutFrom, stderrFrom int64, send func(Chunk) error) (int64, error) {
	for {
		chunks, err := s.store.ReadTurnOutput(ctx, turnID, seq, outputPage)
		if err != nil {
			return seq, err
		}
		for _, c := range chunks {
			seq = c.Seq
			from := stdoutFrom
			if c.Stream == store.StreamStderr {
				from = stderrFrom
			}
			if c.Offset+int64(len(c.Data)) <= from {
				continue
			}
			data, off := c.Data, c.Offset
			if off < from {
				data, off = data[from-off:], from
			}
			if err := send(Chunk{Stream: c.Stream, Offset: off, Data: data}); err != nil {
				return seq, err
			}
		}
		if len(chunks) < outputPage {
			return seq, nil
		}
	}
}

// Sweep fails queued Turns no Runtime picked up in time (or whose Session
// is being deleted), ends running Turns whose connection is gone
// (runtime_disconnected) and running Turns whose compute the lifecycle
// worker observed stopped or missing after they were dispatched (the
// observation's code, compute_stopped or compute_missing: their result
// can no longer arrive), as the store's owner epoch, every second until
// ctx ends. Queued Turns of such a Session are left to their queue
// deadline: an observation is not proof that the compute is gone for
// good.
func (s *Service) Sweep(ctx context.Context, log *slog.Logger) {
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		for _, f := range []func(context.Context) ([]store.TurnRef, error){s.store.ExpireQueuedTurns, s.store.UnconfirmOrphanedTurns, s.store.EndTurnsOnLostCompute} {
			refs, err := f(ctx)
			if err != nil {
				if ctx.Err() == nil {
					log.Warn("turn sweep failed", "error", err)
				}
				continue
			}
			for _, r := range refs {
				s.changed(r.SessionID, r.ID)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
