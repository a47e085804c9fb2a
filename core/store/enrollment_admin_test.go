package store_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/sandbox/errdefs"
)

func TestCreateRequestedEnrollmentTokenIsIdempotentPerRequest(t *testing.T) {
	st, ctx := newStore(t)
	req, id, secret := newUUID(t), tokenID(t), randomBytes(t, 32)
	first, created, err := st.CreateRequestedEnrollmentToken(ctx, req, id, hash(secret), time.Hour)
	must(t, err)
	if !created || first.ID != id || first.ExpiresAt.Sub(first.CreatedAt) != time.Hour || first.Expired {
		t.Fatalf("created %v token %+v", created, first)
	}
	// A retry with fresh token material finds the first token and stores
	// nothing of the retry's.
	again, created, err := st.CreateRequestedEnrollmentToken(ctx, req, tokenID(t), hash(randomBytes(t, 32)), time.Hour)
	must(t, err)
	if created || again.ID != id || !again.CreatedAt.Equal(first.CreatedAt) || !again.ExpiresAt.Equal(first.ExpiresAt) {
		t.Fatalf("retry: created %v token %+v, want the first", created, again)
	}
	// The same request id with another ttl is another request.
	_, _, err = st.CreateRequestedEnrollmentToken(ctx, req, tokenID(t), hash(randomBytes(t, 32)), 2*time.Hour)
	wantClass(t, err, errdefs.ErrExists)
	// The first secret still works: nothing was replaced.
	_, err = st.ConsumeEnrollmentToken(ctx, id, hash(secret), newUUID(t), hash(randomBytes(t, 65)))
	must(t, err)

	for _, tt := range []struct {
		name string
		req  uuid.UUID
		id   string
		hash []byte
		ttl  time.Duration
	}{
		{"nil request id", uuid.Nil, tokenID(t), hash(secret), time.Hour},
		{"short hash", newUUID(t), tokenID(t), secret[:16], time.Hour},
		{"zero ttl", newUUID(t), tokenID(t), hash(secret), 0},
		{"malformed id", newUUID(t), "Token-1", hash(secret), time.Hour},
	} {
		_, _, err := st.CreateRequestedEnrollmentToken(ctx, tt.req, tt.id, tt.hash, tt.ttl)
		wantClass(t, err, errdefs.ErrInvalid)
		secretFree(t, err, secret)
	}
}

func TestReissueEnrollmentToken(t *testing.T) {
	st, ctx := newStore(t)
	req, id, oldSecret := newUUID(t), tokenID(t), randomBytes(t, 32)
	first, _, err := st.CreateRequestedEnrollmentToken(ctx, req, id, hash(oldSecret), time.Hour)
	must(t, err)
	newSecret := randomBytes(t, 32)
	tok, err := st.ReissueEnrollmentToken(ctx, req, id, hash(newSecret))
	must(t, err)
	if tok.ID != id || !tok.ExpiresAt.Equal(first.ExpiresAt) || tok.UsedAt != nil || tok.RevokedAt != nil {
		t.Fatalf("reissued token %+v, want the same token unchanged", tok)
	}
	// The earlier text stops working; the new one works.
	_, err = st.ConsumeEnrollmentToken(ctx, id, hash(oldSecret), newUUID(t), hash(randomBytes(t, 65)))
	wantRejected(t, err, oldSecret)
	_, err = st.ConsumeEnrollmentToken(ctx, id, hash(newSecret), newUUID(t), hash(randomBytes(t, 65)))
	must(t, err)
	// Used: refused, hash kept.
	_, err = st.ReissueEnrollmentToken(ctx, req, id, hash(randomBytes(t, 32)))
	wantClass(t, err, errdefs.ErrFailedPrecondition)
	secretFree(t, err, newSecret)

	// Revoked: refused.
	req2, id2 := newUUID(t), tokenID(t)
	_, _, err = st.CreateRequestedEnrollmentToken(ctx, req2, id2, hash(oldSecret), time.Hour)
	must(t, err)
	_, err = st.RevokeActiveEnrollmentToken(ctx, id2)
	must(t, err)
	_, err = st.ReissueEnrollmentToken(ctx, req2, id2, hash(randomBytes(t, 32)))
	wantClass(t, err, errdefs.ErrFailedPrecondition)

	// A token the request did not make, or an unknown request.
	_, err = st.ReissueEnrollmentToken(ctx, req2, id, hash(randomBytes(t, 32)))
	wantClass(t, err, errdefs.ErrNotFound)
	_, err = st.ReissueEnrollmentToken(ctx, newUUID(t), id, hash(randomBytes(t, 32)))
	wantClass(t, err, errdefs.ErrNotFound)
	_, err = st.ReissueEnrollmentToken(ctx, req, id, oldSecret[:16])
	wantClass(t, err, errdefs.ErrInvalid)
}

func TestRevokeActiveEnrollmentToken(t *testing.T) {
	st, ctx := newStore(t)
	create := func(ttl time.Duration) (string, []byte) {
		id, secret := tokenID(t), randomBytes(t, 32)
		_, err := st.CreateEnrollmentToken(ctx, id, hash(secret), ttl)
		must(t, err)
		return id, secret
	}
	_, err := st.RevokeActiveEnrollmentToken(ctx, tokenID(t))
	wantClass(t, err, errdefs.ErrNotFound)

	active, _ := create(time.Hour)
	wantRevokedOnce(t, func() (store.EnrollmentToken, error) { return st.RevokeActiveEnrollmentToken(ctx, active) })

	expired, _ := create(time.Microsecond)
	tok, err := st.RevokeActiveEnrollmentToken(ctx, expired)
	must(t, err)
	if !tok.Expired || tok.RevokedAt != nil {
		t.Errorf("revoking an expired token gave %+v, want it unchanged", tok)
	}

	used, secret := create(time.Hour)
	node, key := newUUID(t), hash(randomBytes(t, 65))
	_, err = st.ConsumeEnrollmentToken(ctx, used, hash(secret), node, key)
	must(t, err)
	_, err = st.RevokeActiveEnrollmentToken(ctx, used)
	wantClass(t, err, errdefs.ErrFailedPrecondition)
	// The used token still answers its node's replay.
	res, err := st.ConsumeEnrollmentToken(ctx, used, hash(secret), newUUID(t), key)
	must(t, err)
	if res != (store.ConsumeResult{NodeID: node, Replayed: true}) {
		t.Errorf("replay after a refused revocation = %+v", res)
	}
}

func TestListEnrollmentTokensByAge(t *testing.T) {
	st, ctx := newStore(t)
	const total, size = 25, 10
	var all []store.EnrollmentToken
	secrets := map[string][]byte{}
	for range total {
		id, secret := tokenID(t), randomBytes(t, 32)
		tok, err := st.CreateEnrollmentToken(ctx, id, hash(secret), time.Hour)
		must(t, err)
		all = append(all, tok)
		secrets[id] = secret
	}
	byAge := func(a, b store.EnrollmentToken) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	}
	slices.SortFunc(all, byAge)
	ids := func(toks []store.EnrollmentToken) []string {
		return idsOf(toks, func(tok store.EnrollmentToken) string { return tok.ID })
	}
	list := func(includeInactive bool) ([]string, []int) {
		return pagedIDs(t, size, func(after store.TokenCursor) ([]store.EnrollmentToken, error) {
			return st.ListEnrollmentTokensByAge(ctx, size, after, includeInactive)
		}, func(last store.EnrollmentToken) store.TokenCursor {
			return store.TokenCursor{CreatedAt: last.CreatedAt, ID: last.ID}
		}, ids)
	}
	got, sizes := list(false)
	if !slices.Equal(got, ids(all)) || !slices.Equal(sizes, []int{10, 10, 5}) {
		t.Fatalf("listed %v in pages %v\nwant %v in [10 10 5]", got, sizes, ids(all))
	}

	// Used, revoked and expired tokens are listed only when asked for.
	used, revoked := all[3].ID, all[17].ID
	_, err := st.ConsumeEnrollmentToken(ctx, used, hash(secrets[used]), newUUID(t), hash(randomBytes(t, 65)))
	must(t, err)
	_, err = st.RevokeActiveEnrollmentToken(ctx, revoked)
	must(t, err)
	expired := tokenID(t)
	_, err = st.CreateEnrollmentToken(ctx, expired, hash(randomBytes(t, 32)), time.Microsecond)
	must(t, err)
	got, _ = list(false)
	want := slices.DeleteFunc(ids(all), func(id string) bool { return id == used || id == revoked })
	if !slices.Equal(got, want) {
		t.Errorf("active tokens %v\nwant %v", got, want)
	}
	got, _ = list(true)
	if want := append(ids(all), expired); !slices.Equal(got, want) {
		t.Errorf("all tokens %v\nwant %v", got, want)
	}
	for _, n := range []int{0, -1, store.MaxPageSize + 2} {
		_, err := st.ListEnrollmentTokensByAge(ctx, n, store.TokenCursor{}, true)
		wantClass(t, err, errdefs.ErrInvalid)
	}
}

func TestEnrollmentTokensOfNodes(t *testing.T) {
	st, ctx := newStore(t)
	id, secret := newToken(t, ctx, st)
	enrolled, other := newUUID(t), newUUID(t)
	_, err := st.ConsumeEnrollmentToken(ctx, id, hash(secret), enrolled, hash(randomBytes(t, 65)))
	must(t, err)
	got, err := st.EnrollmentTokensOfNodes(ctx, []uuid.UUID{enrolled, other})
	must(t, err)
	if len(got) != 1 || got[enrolled] != id {
		t.Errorf("tokens of nodes = %v, want only %s -> %s", got, enrolled, id)
	}
	got, err = st.EnrollmentTokensOfNodes(ctx, nil)
	must(t, err)
	if len(got) != 0 {
		t.Errorf("tokens of no nodes = %v", got)
	}
}
