package store_test

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/sandbox/errdefs"
)

// rejection is the whole text of every refused consumption.
const rejection = "consume enrollment token: enrollment token rejected: invalid argument"

// secretFree fails the test when err's text carries secret or a hash of
// it, in any encoding the store could have used.
func secretFree(t *testing.T, err error, secret []byte) {
	t.Helper()
	text := err.Error()
	for _, s := range []string{
		string(secret), hex.EncodeToString(secret), base64.RawURLEncoding.EncodeToString(secret),
		hex.EncodeToString(hash(secret)), base64.StdEncoding.EncodeToString(hash(secret)),
	} {
		if strings.Contains(text, s) {
			t.Errorf("error %q carries the secret or its hash", text)
		}
	}
}

func wantRejected(t *testing.T, err error, secret []byte) {
	t.Helper()
	if !errors.Is(err, store.ErrEnrollmentRejected) || !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("error %v, want ErrEnrollmentRejected", err)
	}
	if err.Error() != rejection {
		t.Errorf("rejection text %q, want exactly %q", err, rejection)
	}
	secretFree(t, err, secret)
}

func TestConsumeEnrollmentTokenOnce(t *testing.T) {
	st, ctx := newStore(t)
	id, secret := tokenID(t), randomBytes(t, 32)
	tok, err := st.CreateEnrollmentToken(ctx, id, hash(secret), time.Hour)
	must(t, err)
	if tok.ID != id || tok.Expired || tok.UsedAt != nil || tok.RevokedAt != nil ||
		tok.ExpiresAt.Sub(tok.CreatedAt) != time.Hour {
		t.Fatalf("created token = %+v", tok)
	}

	nodeA, keyA := newUUID(t), hash(randomBytes(t, 65))
	res, err := st.ConsumeEnrollmentToken(ctx, id, hash(secret), nodeA, keyA)
	must(t, err)
	if res != (store.ConsumeResult{NodeID: nodeA}) {
		t.Fatalf("first consumption = %+v", res)
	}
	// Another key with the right secret: refused.
	_, err = st.ConsumeEnrollmentToken(ctx, id, hash(secret), newUUID(t), hash(randomBytes(t, 65)))
	wantRejected(t, err, secret)
	// The same key again (a lost response): the same node, as a replay, even
	// with another node id proposed.
	res, err = st.ConsumeEnrollmentToken(ctx, id, hash(secret), newUUID(t), keyA)
	must(t, err)
	if res != (store.ConsumeResult{NodeID: nodeA, Replayed: true}) {
		t.Fatalf("replay = %+v, want node %v replayed", res, nodeA)
	}
	// A replay needs the secret too.
	_, err = st.ConsumeEnrollmentToken(ctx, id, hash([]byte("wrong")), nodeA, keyA)
	wantRejected(t, err, secret)

	tok, err = st.GetEnrollmentToken(ctx, id)
	must(t, err)
	if tok.UsedAt == nil || tok.NodeID == nil || *tok.NodeID != nodeA || !slices.Equal(tok.PublicKeyHash, keyA) {
		t.Fatalf("consumed token = %+v", tok)
	}
	// Revocation ends replays.
	_, err = st.RevokeEnrollmentToken(ctx, id)
	must(t, err)
	_, err = st.ConsumeEnrollmentToken(ctx, id, hash(secret), nodeA, keyA)
	wantRejected(t, err, secret)
}

func TestConsumeEnrollmentTokenRejects(t *testing.T) {
	st, ctx := newStore(t)
	secret := randomBytes(t, 32)
	create := func(ttl time.Duration) string {
		id := tokenID(t)
		_, err := st.CreateEnrollmentToken(ctx, id, hash(secret), ttl)
		must(t, err)
		return id
	}
	wrongSecret := create(time.Hour)
	expired := create(time.Microsecond) // over before the next statement, by the database clock
	revoked := create(time.Hour)
	_, err := st.RevokeEnrollmentToken(ctx, revoked)
	must(t, err)
	shortSecret := create(time.Hour)

	tok, err := st.GetEnrollmentToken(ctx, expired)
	must(t, err)
	if !tok.Expired {
		t.Fatalf("token %+v has not expired by the database clock", tok)
	}
	for _, tt := range []struct {
		name string
		id   string
		hash []byte
	}{
		{"unknown id", tokenID(t), hash(secret)},
		{"malformed id", "not-a-token-id", hash(secret)},
		{"wrong secret", wrongSecret, hash(randomBytes(t, 32))},
		{"expired", expired, hash(secret)},
		{"revoked", revoked, hash(secret)},
		{"secret hash of the wrong length", shortSecret, hash(secret)[:16]},
		{"the secret itself instead of its hash", shortSecret, secret},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := st.ConsumeEnrollmentToken(ctx, tt.id, tt.hash, newUUID(t), hash(randomBytes(t, 65)))
			wantRejected(t, err, secret)
		})
	}
	// A wrong secret had no effect: the right one still enrolls.
	if _, err := st.ConsumeEnrollmentToken(ctx, wrongSecret, hash(secret), newUUID(t), hash(randomBytes(t, 65))); err != nil {
		t.Errorf("the right secret after a wrong one: %v", err)
	}
	for _, id := range []string{expired, revoked} {
		tok, err := st.GetEnrollmentToken(ctx, id)
		must(t, err)
		if tok.UsedAt != nil {
			t.Errorf("rejected token %s was marked used", id)
		}
	}
	// Caller mistakes that are not credentials name their field.
	_, err = st.ConsumeEnrollmentToken(ctx, wrongSecret, hash(secret), uuid.Nil, hash(randomBytes(t, 65)))
	wantClass(t, err, errdefs.ErrInvalid)
	_, err = st.ConsumeEnrollmentToken(ctx, wrongSecret, hash(secret), newUUID(t), []byte("short"))
	wantClass(t, err, errdefs.ErrInvalid)
}

func TestConsumeEnrollmentTokenRace(t *testing.T) {
	st, ctx := newStore(t)
	id, secret := newToken(t, ctx, st)
	const nodes = 8
	ids, keys := make([]uuid.UUID, nodes), make([][]byte, nodes)
	for i := range nodes {
		ids[i], keys[i] = newUUID(t), hash(randomBytes(t, 65))
	}
	results := make([]store.ConsumeResult, nodes)
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() { results[i], errs[i] = st.ConsumeEnrollmentToken(ctx, id, hash(secret), ids[i], keys[i]) })
	}
	wg.Wait()
	winners := 0
	for i := range nodes {
		if errs[i] != nil {
			wantRejected(t, errs[i], secret)
			continue
		}
		winners++
		if results[i] != (store.ConsumeResult{NodeID: ids[i]}) {
			t.Errorf("winner %d got %+v", i, results[i])
		}
	}
	if winners != 1 {
		t.Errorf("%d enrollments consumed one token, want 1", winners)
	}
}

func TestCreateEnrollmentTokenValidates(t *testing.T) {
	st, ctx := newStore(t)
	id, secret := newToken(t, ctx, st)
	for _, tt := range []struct {
		name  string
		id    string
		hash  []byte
		ttl   time.Duration
		class error
	}{
		{"taken id", id, hash(secret), time.Hour, errdefs.ErrExists},
		{"malformed id", "Token-1", hash(secret), time.Hour, errdefs.ErrInvalid},
		{"short hash", tokenID(t), secret[:16], time.Hour, errdefs.ErrInvalid},
		{"zero ttl", tokenID(t), hash(secret), 0, errdefs.ErrInvalid},
		{"negative ttl", tokenID(t), hash(secret), -time.Minute, errdefs.ErrInvalid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := st.CreateEnrollmentToken(ctx, tt.id, tt.hash, tt.ttl)
			wantClass(t, err, tt.class)
			secretFree(t, err, secret)
		})
	}
}

func TestRevokeEnrollmentToken(t *testing.T) {
	st, ctx := newStore(t)
	_, err := st.RevokeEnrollmentToken(ctx, tokenID(t))
	wantClass(t, err, errdefs.ErrNotFound)
	id, _ := newToken(t, ctx, st)
	wantRevokedOnce(t, func() (store.EnrollmentToken, error) { return st.RevokeEnrollmentToken(ctx, id) })
}

// wantRevokedOnce revokes a token twice through revoke and fails the test
// unless both succeed and the second keeps the first revocation time.
func wantRevokedOnce(t *testing.T, revoke func() (store.EnrollmentToken, error)) {
	t.Helper()
	first, err := revoke()
	must(t, err)
	again, err := revoke()
	must(t, err)
	if first.RevokedAt == nil || again.RevokedAt == nil || !first.RevokedAt.Equal(*again.RevokedAt) {
		t.Errorf("revoked at %v then %v, want the first time kept", first.RevokedAt, again.RevokedAt)
	}
}

func TestListEnrollmentTokensPages(t *testing.T) {
	st, ctx := newStore(t)
	const total, size = 25, 10
	var want []string
	for range total {
		id := tokenID(t)
		_, err := st.CreateEnrollmentToken(ctx, id, hash(randomBytes(t, 32)), time.Hour)
		must(t, err)
		want = append(want, id)
	}
	slices.Sort(want)
	got, sizes := idPages(t, func(after string) ([]store.EnrollmentToken, string, error) {
		return st.ListEnrollmentTokens(ctx, size, after)
	}, func(tok store.EnrollmentToken) string { return tok.ID })
	if !slices.Equal(got, want) {
		t.Errorf("listed %v, want %v", got, want)
	}
	if !slices.Equal(sizes, []int{10, 10, 5}) {
		t.Errorf("page sizes %v, want [10 10 5]", sizes)
	}
	// An exact multiple ends without an empty page.
	page, next, err := st.ListEnrollmentTokens(ctx, total, "")
	must(t, err)
	if len(page) != total || next != "" {
		t.Errorf("one full page: %d tokens, next %q", len(page), next)
	}
	for _, n := range []int{0, -1, store.MaxPageSize + 1} {
		_, _, err := st.ListEnrollmentTokens(ctx, n, "")
		wantClass(t, err, errdefs.ErrInvalid)
	}
}
