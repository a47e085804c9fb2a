package projects

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"berth.dev/sandbox/errdefs"

	"berth.dev/core/events"
	"berth.dev/core/store"
)

// Key is what a project key authenticates as: its id, project and tenant,
// never its secret.
type Key struct {
	ID        uuid.UUID
	ProjectID uuid.UUID
	TenantID  uuid.UUID
}

// KeyReader is what the index reads: the store's Reader.
type KeyReader interface {
	LiveProjectKeys(ctx context.Context) ([]store.LiveKey, error)
	VerifyProjectKey(ctx context.Context, id uuid.UUID) (store.LiveKey, error)
}

// Index timing.
const (
	// IndexReload is how often the index reloads every live key whatever
	// it heard: the safety net of a lost keys_changed notification.
	IndexReload = 30 * time.Second
	// VerifyCache is how long a positive Verify answer is reused for the
	// same key: a burst of calls costs one read, and a revocation takes
	// effect within it on every Core (at once on the Core that heard it).
	VerifyCache = time.Second
)

// ErrKeyNotLive is Verify's answer for a key that may not authenticate
// now: unknown, revoked, expired or of a deleted project (the database
// decides, on its clock).
var ErrKeyNotLive = errors.New("project key not live")

// indexed is one live key in the index.
type indexed struct {
	key      Key
	digest   [sha256.Size]byte
	expireAt *time.Time
}

// verified is a cached positive Verify.
type verified struct {
	key Key
	at  time.Time
}

// KeyIndex authenticates project keys in two stages. Check, as a call's
// headers arrive, compares the token with an in-memory copy of the live
// keys and does no I/O (grpc-go runs it on the connection's goroutine);
// Verify, before the handler runs, asks the database whether the key may
// authenticate now, and is authoritative. The copy is reloaded whole on
// every keys_changed event (any Core's creation or revocation) and every
// IndexReload; a failed reload keeps the previous copy, which Verify
// still overrules.
type KeyIndex struct {
	r   KeyReader
	now func() time.Time
	// keys is replaced whole on each reload (copy on write); loading
	// serializes reloads, so a reload that read the database earlier
	// never replaces the copy of one that read it later.
	keys    atomic.Pointer[map[uuid.UUID]indexed]
	loading sync.Mutex
	mu      sync.Mutex
	// cache holds positive Verify answers for VerifyCache; cleared on
	// every keys_changed event.
	cache map[uuid.UUID]verified
	// reloadFailures counts Run's failed reloads
	// (berth.project_keys.reload.failures); nil when the meter refused it.
	reloadFailures metric.Int64Counter
}

// dummyDigest is what Check compares a token of an unknown key id
// against, so the comparison costs the same for known and unknown ids.
var dummyDigest = sha256.Sum256([]byte("berth project key index: no such key"))

// NewKeyIndex returns an empty index over r; now is Core's clock, used
// only for the cache's age and Check's early refusal of an expired key.
func NewKeyIndex(r KeyReader, now func() time.Time) *KeyIndex {
	x := &KeyIndex{r: r, now: now, cache: map[uuid.UUID]verified{}}
	// berth.project_keys.reload.failures (Prometheus
	// berth_project_keys_reload_failures_total): reloads that kept the
	// previous copy.
	if c, err := otel.Meter("berth.dev/core/projects").Int64Counter("berth.project_keys.reload.failures",
		metric.WithDescription("Key index reloads that failed and kept the previous copy of the live keys")); err == nil {
		x.reloadFailures = c
	}
	empty := map[uuid.UUID]indexed{}
	x.keys.Store(&empty)
	return x
}

// Load replaces the index with every live key. Core calls it before the
// admin listener opens, so the first call already sees the keys.
func (x *KeyIndex) Load(ctx context.Context) error {
	x.loading.Lock()
	defer x.loading.Unlock()
	live, err := x.r.LiveProjectKeys(ctx)
	if err != nil {
		return fmt.Errorf("load project keys: %w", err)
	}
	m := make(map[uuid.UUID]indexed, len(live))
	for _, k := range live {
		if len(k.Digest) != sha256.Size {
			continue
		}
		e := indexed{key: Key{ID: k.ID, ProjectID: k.ProjectID, TenantID: k.TenantID}, expireAt: k.ExpireAt}
		copy(e.digest[:], k.Digest)
		m[k.ID] = e
	}
	x.keys.Store(&m)
	return nil
}

// Run reloads the index on every KeysChanged event of bus and every
// IndexReload, until ctx ends. A failed reload is logged without the
// error's text reaching a caller; the previous copy stays.
func (x *KeyIndex) Run(ctx context.Context, bus *events.Bus, log *slog.Logger) {
	wake := bus.Subscribe(events.Any(events.KeysChanged))
	defer wake.Close()
	t := time.NewTicker(IndexReload)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake.Ready():
			wake.Take()
			x.forget()
		case <-t.C:
		}
		if err := x.Load(ctx); err != nil && ctx.Err() == nil {
			if x.reloadFailures != nil {
				x.reloadFailures.Add(ctx, 1)
			}
			log.Warn("project key index reload failed; the previous copy stays", "error", err)
		}
	}
}

// forget drops every cached Verify answer.
func (x *KeyIndex) forget() {
	x.mu.Lock()
	clear(x.cache)
	x.mu.Unlock()
}

// Check authenticates a key token from the copy: its form, its id known,
// its digest equal (constant time, against a fixed dummy for an unknown
// id) and, by Core's clock, not past its expiry. It does no I/O. A true
// answer is provisional: Verify decides.
func (x *KeyIndex) Check(token string) (Key, bool) {
	id, ok := ParseKeyToken(token)
	if !ok {
		return Key{}, false
	}
	e, known := (*x.keys.Load())[id]
	want := dummyDigest
	if known {
		want = e.digest
	}
	got := KeyDigest(token)
	match := subtle.ConstantTimeCompare(got[:], want[:]) == 1
	if !known || !match {
		return Key{}, false
	}
	if e.expireAt != nil && !x.now().Before(*e.expireAt) {
		return Key{}, false
	}
	return e.key, true
}

// Verify asks the database whether key id may authenticate now
// (store.VerifyProjectKey: not revoked, not expired on the database
// clock, its project live) and returns it; ErrKeyNotLive when it may
// not. A positive answer is reused for VerifyCache. Any other error (the
// database unavailable) is returned as it is: it is not a refusal of the
// key.
func (x *KeyIndex) Verify(ctx context.Context, id uuid.UUID) (Key, error) {
	now := x.now()
	x.mu.Lock()
	v, ok := x.cache[id]
	x.mu.Unlock()
	if ok && now.Sub(v.at) < VerifyCache && now.Sub(v.at) >= 0 {
		return v.key, nil
	}
	k, err := x.r.VerifyProjectKey(ctx, id)
	if errors.Is(err, errdefs.ErrNotFound) {
		return Key{}, ErrKeyNotLive
	}
	if err != nil {
		return Key{}, err
	}
	key := Key{ID: k.ID, ProjectID: k.ProjectID, TenantID: k.TenantID}
	x.mu.Lock()
	x.cache[id] = verified{key: key, at: now}
	x.mu.Unlock()
	return key, nil
}
