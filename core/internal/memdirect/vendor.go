package memdirect

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The vendor's call names, as Calls reports them and as Hold and
// LoseAnswer take them.
const (
	CallWhoAmI     = "whoami"
	CallCreate     = "create"
	CallList       = "list"
	CallSetTimeout = "set_timeout"
	CallKill       = "kill"
	CallRun        = "run"
)

// Call is one call as the vendor received it.
type Call struct {
	Name string
	// Team is the team of the call's API key, "" for a key the vendor
	// does not know (the call was answered 401).
	Team     string
	Mutating bool
}

// Sandbox is a copy of one sandbox the vendor holds.
type Sandbox struct {
	ID       string
	Team     string
	Template string
	Metadata map[string]string
	EndAt    time.Time
}

// Vendor is the in-memory vendor behind memdirect adapters, shared by
// every adapter built over it so that what one adapter instance created
// another sees (a Core restart, a rebuilt generation, a key change):
// API keys of teams, each team's sandboxes with their metadata and
// lease, and faults a test arms. Its calls are atomic: a call that
// returns has made its effect or none, and a held call makes none once
// its context ends, so nothing of a call appears after it returned. It
// is safe for concurrent use.
type Vendor struct {
	id string

	mu        sync.Mutex
	keys      map[keyDigest]string // API key's digest -> team
	sandboxes map[string]*Sandbox  // id -> sandbox
	next      int
	offset    time.Duration
	holds     map[string][]hold
	lose      map[string]int
	calls     []Call
}

// keyDigest is an API key's SHA-256: the vendor keeps digests, as a real
// one does, so no printing of a Vendor (or of an adapter that points to
// it, through a mismatched fmt verb) shows a key.
type keyDigest [sha256.Size]byte

func digest(key string) keyDigest { return sha256.Sum256([]byte(key)) }

// hold is one armed slow call: received is closed when the vendor has
// the call, release lets it go on.
type hold struct {
	received chan struct{}
	release  chan struct{}
}

var vendors atomic.Int64

// NewVendor returns a vendor with no keys and no sandboxes.
func NewVendor() *Vendor {
	return &Vendor{
		id:        "vendor-" + strconv.FormatInt(vendors.Add(1), 10),
		keys:      map[keyDigest]string{},
		sandboxes: map[string]*Sandbox{},
		holds:     map[string][]hold{},
		lose:      map[string]int{},
	}
}

// AddKey makes key an API key of team.
func (v *Vendor) AddKey(key, team string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.keys[digest(key)] = team
}

// RemoveKey revokes key: the vendor answers its calls 401.
func (v *Vendor) RemoveKey(key string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.keys, digest(key))
}

// Advance moves the vendor's clock on by d: sandboxes whose lease ends
// by then are gone, as the vendor kills a sandbox at its timeout.
func (v *Vendor) Advance(d time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.offset += d
}

// Hold arms a slow call: the next call named call blocks once the vendor
// has received it (received is closed then) until release is called,
// and then makes its effect; if the call's context ends first it makes
// none and answers nothing. release may be called more than once.
func (v *Vendor) Hold(call string) (received <-chan struct{}, release func()) {
	h := hold{received: make(chan struct{}), release: make(chan struct{})}
	v.mu.Lock()
	v.holds[call] = append(v.holds[call], h)
	v.mu.Unlock()
	var once sync.Once
	return h.received, func() { once.Do(func() { close(h.release) }) }
}

// LoseAnswer arms a lost answer: the next call named call makes its
// effect, and then the connection drops before its answer (for create:
// the sandbox exists, the caller does not learn it).
func (v *Vendor) LoseAnswer(call string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.lose[call]++
}

// Plant adds a sandbox to team with the given metadata, as something
// other than this adapter would (another installation sharing the team,
// a sandbox with foreign berth_* metadata), and returns its id.
func (v *Vendor) Plant(team string, metadata map[string]string) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.add(team, "planted", metadata, time.Hour).ID
}

// Sandboxes returns copies of every sandbox the vendor holds, by id.
func (v *Vendor) Sandboxes() []Sandbox {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.sweep()
	out := make([]Sandbox, 0, len(v.sandboxes))
	for _, s := range v.sandboxes {
		out = append(out, copySandbox(s))
	}
	slices.SortFunc(out, func(a, b Sandbox) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Len returns how many sandboxes the vendor holds.
func (v *Vendor) Len() int { return len(v.Sandboxes()) }

// Calls returns the calls received since the last ResetCalls, in order.
func (v *Vendor) Calls() []Call {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.calls)
}

// ResetCalls forgets the calls received so far.
func (v *Vendor) ResetCalls() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.calls = nil
}

// vendorError is a complete answer refusing a call, with the text a
// chatty vendor sends (it quotes the API key it refused), which an
// adapter must never pass on.
type vendorError struct {
	status int
	text   string
}

func (e *vendorError) Error() string {
	return "vendor answered " + strconv.Itoa(e.status) + ": " + e.text
}

// errNoAnswer is a call whose connection dropped before its answer: the
// outcome is unknown to the caller.
var errNoAnswer = errors.New("memdirect vendor: connection closed before an answer")

func statusOf(err error) int {
	var ve *vendorError
	if errors.As(err, &ve) {
		return ve.status
	}
	return 0
}

// receive takes a call: nothing is sent when ctx has already ended;
// otherwise the call is recorded, waits when held, and is authenticated.
// lost says the caller must get errNoAnswer after the call's effect.
func (v *Vendor) receive(ctx context.Context, name, key string, mutating bool) (team string, lost bool, err error) {
	if err := ctx.Err(); err != nil {
		return "", false, err
	}
	v.mu.Lock()
	team = v.keys[digest(key)]
	v.calls = append(v.calls, Call{Name: name, Team: team, Mutating: mutating})
	var h *hold
	if hs := v.holds[name]; len(hs) > 0 {
		h = &hs[0]
		v.holds[name] = hs[1:]
	}
	if v.lose[name] > 0 {
		v.lose[name]--
		lost = true
	}
	v.mu.Unlock()
	if h != nil {
		close(h.received)
		select {
		case <-h.release:
		case <-ctx.Done():
			return "", false, ctx.Err()
		}
	}
	if team == "" {
		return "", false, &vendorError{status: 401, text: fmt.Sprintf("api key %q is not valid", key)}
	}
	return team, lost, nil
}

// whoAmI answers the team of key.
func (v *Vendor) whoAmI(ctx context.Context, key string) (string, error) {
	team, lost, err := v.receive(ctx, CallWhoAmI, key, false)
	if err != nil {
		return "", err
	}
	if lost {
		return "", errNoAnswer
	}
	return team, nil
}

// create starts a sandbox of template in key's team with metadata and a
// lease, and answers it.
func (v *Vendor) create(ctx context.Context, key, template string, metadata map[string]string, lease time.Duration) (Sandbox, error) {
	team, lost, err := v.receive(ctx, CallCreate, key, true)
	if err != nil {
		return Sandbox{}, err
	}
	if template == "" || lease <= 0 {
		return Sandbox{}, &vendorError{status: 400, text: "template and a positive timeout are required"}
	}
	v.mu.Lock()
	s := copySandbox(v.add(team, template, metadata, lease))
	v.mu.Unlock()
	if lost {
		return Sandbox{}, errNoAnswer
	}
	return s, nil
}

// list answers key's team's sandboxes whose metadata hold every pair of
// filter with an equal value, by id.
func (v *Vendor) list(ctx context.Context, key string, filter map[string]string) ([]Sandbox, error) {
	team, lost, err := v.receive(ctx, CallList, key, false)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	v.sweep()
	var out []Sandbox
	for _, s := range v.sandboxes {
		if s.Team != team {
			continue
		}
		match := true
		for k, want := range filter {
			if got, ok := s.Metadata[k]; !ok || got != want {
				match = false
				break
			}
		}
		if match {
			out = append(out, copySandbox(s))
		}
	}
	v.mu.Unlock()
	if lost {
		return nil, errNoAnswer
	}
	slices.SortFunc(out, func(a, b Sandbox) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// setTimeout replaces the lease of key's team's sandbox id: it ends
// lease from now.
func (v *Vendor) setTimeout(ctx context.Context, key, id string, lease time.Duration) error {
	team, lost, err := v.receive(ctx, CallSetTimeout, key, true)
	if err != nil {
		return err
	}
	v.mu.Lock()
	v.sweep()
	s, ok := v.sandboxes[id]
	found := ok && s.Team == team
	if found {
		s.EndAt = v.now().Add(lease)
	}
	v.mu.Unlock()
	switch {
	case !found:
		return &vendorError{status: 404, text: "sandbox " + id + " not found"}
	case lost:
		return errNoAnswer
	}
	return nil
}

// kill removes key's team's sandbox id.
func (v *Vendor) kill(ctx context.Context, key, id string) error {
	team, lost, err := v.receive(ctx, CallKill, key, true)
	if err != nil {
		return err
	}
	v.mu.Lock()
	v.sweep()
	s, ok := v.sandboxes[id]
	found := ok && s.Team == team
	if found {
		delete(v.sandboxes, id)
	}
	v.mu.Unlock()
	switch {
	case !found:
		return &vendorError{status: 404, text: "sandbox " + id + " not found"}
	case lost:
		return errNoAnswer
	}
	return nil
}

// run runs nothing in key's team's sandbox id and answers exit 0 with no
// output.
func (v *Vendor) run(ctx context.Context, key, id string) (int, error) {
	team, lost, err := v.receive(ctx, CallRun, key, true)
	if err != nil {
		return 0, err
	}
	v.mu.Lock()
	v.sweep()
	s, ok := v.sandboxes[id]
	found := ok && s.Team == team
	v.mu.Unlock()
	switch {
	case !found:
		return 0, &vendorError{status: 404, text: "sandbox " + id + " not found"}
	case lost:
		return 0, errNoAnswer
	}
	return 0, nil
}

// add stores a new sandbox; v.mu is held.
func (v *Vendor) add(team, template string, metadata map[string]string, lease time.Duration) *Sandbox {
	v.next++
	s := &Sandbox{
		ID:       fmt.Sprintf("i%020d", v.next),
		Team:     team,
		Template: template,
		Metadata: maps.Clone(metadata),
		EndAt:    v.now().Add(lease),
	}
	v.sandboxes[s.ID] = s
	return s
}

// sweep removes the sandboxes whose lease has ended; v.mu is held.
func (v *Vendor) sweep() {
	now := v.now()
	for id, s := range v.sandboxes {
		if !s.EndAt.After(now) {
			delete(v.sandboxes, id)
		}
	}
}

// now is the vendor's clock; v.mu is held.
func (v *Vendor) now() time.Time { return time.Now().Add(v.offset) }

func copySandbox(s *Sandbox) Sandbox {
	c := *s
	c.Metadata = maps.Clone(s.Metadata)
	return c
}
