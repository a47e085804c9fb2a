package enrollment_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/platform/nodetls"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/enrollment"
	"berth.dev/core/enrollment/enrollmenttest"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

func TestCreateEnrollmentToken(t *testing.T) {
	f := enrollmenttest.New(t)
	issued, err := f.Tokens.Create(f.Ctx, uuid.New(), 90*time.Minute)
	errdefstest.Must(t, err)
	tok, err := nodetls.ParseToken(issued.Text.Reveal())
	if err != nil {
		t.Fatalf("token text does not parse: %v", err)
	}
	if tok.ID() != issued.Token.ID || tok.CAFingerprint() != f.CA.Fingerprint() {
		t.Fatalf("token text names id %s and CA %s, want %s and %s", tok.ID(), tok.CAFingerprint(), issued.Token.ID, f.CA.Fingerprint())
	}
	if got := f.StoredSecretHash(t, tok.ID()); !bytes.Equal(got, tok.SecretHash()) {
		t.Fatal("the stored secret hash is not the SHA-256 of the text's secret")
	}
	rec := issued.Token
	if rec.ExpiresAt.Sub(rec.CreatedAt) != 90*time.Minute || rec.Expired || rec.UsedAt != nil || rec.RevokedAt != nil || rec.NodeID != nil {
		t.Fatalf("token record %+v", rec)
	}
	// The text never prints, however the result is formatted.
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		if s := fmt.Sprintf(verb, issued); strings.Contains(s, issued.Text.Reveal()) || strings.Contains(s, strings.Split(issued.Text.Reveal(), ".")[2]) {
			t.Errorf("%s prints the token text", verb)
		}
	}
	// The text enrolls a node.
	res, err := f.Enroll.Enroll(f.Ctx, issued.Text.Reveal(), enrollmenttest.NewCSR(t), "node.test:7443")
	errdefstest.Must(t, err)
	used, err := f.St.GetEnrollmentToken(f.Ctx, rec.ID)
	errdefstest.Must(t, err)
	if used.NodeID == nil || *used.NodeID != res.NodeID {
		t.Fatalf("token used by %v, want node %v", used.NodeID, res.NodeID)
	}
}

func TestCreateEnrollmentTokenRetry(t *testing.T) {
	f := enrollmenttest.New(t)
	req := uuid.New()
	first, err := f.Tokens.Create(f.Ctx, req, time.Hour)
	errdefstest.Must(t, err)
	// The response was lost: the retry re-issues the same token.
	second, err := f.Tokens.Create(f.Ctx, req, time.Hour)
	errdefstest.Must(t, err)
	if second.Token.ID != first.Token.ID || !second.Token.ExpiresAt.Equal(first.Token.ExpiresAt) {
		t.Fatalf("retry gave token %s expiring %v, want %s expiring %v",
			second.Token.ID, second.Token.ExpiresAt, first.Token.ID, first.Token.ExpiresAt)
	}
	if second.Text.Reveal() == first.Text.Reveal() {
		t.Fatal("retry returned the same text: Core cannot know it")
	}
	tok, err := nodetls.ParseToken(second.Text.Reveal())
	errdefstest.Must(t, err)
	if tok.ID() != first.Token.ID || !bytes.Equal(f.StoredSecretHash(t, tok.ID()), tok.SecretHash()) {
		t.Fatal("the retry's text is not what the store now checks")
	}
	if page := allTokens(t, f); len(page) != 1 {
		t.Fatalf("%d tokens after a retry, want 1", len(page))
	}
	// The earlier text stops working; the new one enrolls.
	_, err = f.Enroll.Enroll(f.Ctx, first.Text.Reveal(), enrollmenttest.NewCSR(t), "node.test:7443")
	errdefstest.WantClass(t, err, enrollment.ErrRejected)
	_, err = f.Enroll.Enroll(f.Ctx, second.Text.Reveal(), enrollmenttest.NewCSR(t), "node.test:7443")
	errdefstest.Must(t, err)

	// Used meanwhile: refused, and the used token keeps its secret.
	hash := f.StoredSecretHash(t, tok.ID())
	_, err = f.Tokens.Create(f.Ctx, req, time.Hour)
	errdefstest.WantClass(t, err, errdefs.ErrFailedPrecondition)
	if !bytes.Equal(f.StoredSecretHash(t, tok.ID()), hash) {
		t.Fatal("a refused retry replaced the secret of a used token")
	}
	// The same request id with another ttl is another request.
	_, err = f.Tokens.Create(f.Ctx, req, 2*time.Hour)
	errdefstest.WantClass(t, err, errdefs.ErrExists)

	// Revoked meanwhile: refused.
	req2 := uuid.New()
	revoked, err := f.Tokens.Create(f.Ctx, req2, time.Hour)
	errdefstest.Must(t, err)
	_, err = f.Tokens.Revoke(f.Ctx, revoked.Token.ID)
	errdefstest.Must(t, err)
	_, err = f.Tokens.Create(f.Ctx, req2, time.Hour)
	errdefstest.WantClass(t, err, errdefs.ErrFailedPrecondition)
}

func TestCreateEnrollmentTokenConcurrentRetries(t *testing.T) {
	f := enrollmenttest.New(t)
	req := uuid.New()
	const calls = 6
	issued := make([]enrollment.IssuedToken, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() { issued[i], errs[i] = f.Tokens.Create(f.Ctx, req, time.Hour) })
	}
	wg.Wait()
	working := 0
	for i := range calls {
		errdefstest.Must(t, errs[i])
		if issued[i].Token.ID != issued[0].Token.ID {
			t.Fatalf("one request made tokens %s and %s", issued[0].Token.ID, issued[i].Token.ID)
		}
		tok, err := nodetls.ParseToken(issued[i].Text.Reveal())
		errdefstest.Must(t, err)
		if bytes.Equal(f.StoredSecretHash(t, tok.ID()), tok.SecretHash()) {
			working++
		}
	}
	// Every answer but the last write's text has stopped working.
	if working != 1 {
		t.Errorf("%d of %d answers work, want exactly 1", working, calls)
	}
}

// The request id's form (a canonical UUID in the request) is the admin
// adapter's to check (core/nodeadmin's tests); the logic refuses only the
// nil UUID, which no retry identity may be.
func TestCreateEnrollmentTokenValidates(t *testing.T) {
	f := enrollmenttest.New(t)
	_, err := f.Tokens.Create(f.Ctx, uuid.Nil, time.Hour)
	if err == nil {
		t.Fatal("request id uuid.Nil accepted")
	}
	errdefstest.WantField(t, err, "request_id")
	for _, ttl := range []time.Duration{0, -time.Hour, time.Second, time.Minute - time.Microsecond, nodetls.MaxTokenTTL + time.Second} {
		_, err := f.Tokens.Create(f.Ctx, uuid.New(), ttl)
		if err == nil {
			t.Fatalf("ttl %s accepted", ttl)
		}
		errdefstest.WantField(t, err, "ttl")
	}
	for _, ttl := range []time.Duration{enrollment.MinTokenTTL, enrollment.MaxTokenTTL} {
		issued, err := f.Tokens.Create(f.Ctx, uuid.New(), ttl)
		errdefstest.Must(t, err)
		if got := issued.Token.ExpiresAt.Sub(issued.Token.CreatedAt); got != ttl {
			t.Errorf("ttl %s stored as %s", ttl, got)
		}
	}
	if page := allTokens(t, f); len(page) != 2 {
		t.Errorf("%d tokens stored, want only the 2 valid requests'", len(page))
	}
}

// Page sizes and page tokens are the admin adapter's (core/nodeadmin's
// tests); the logic lists by keyset cursor and limit.
func TestListEnrollmentTokens(t *testing.T) {
	f := enrollmenttest.New(t)
	const total, size = 12, 5
	var want []string
	for range total {
		want = append(want, f.Issue(t, time.Hour).Token.ID)
	}
	list := func(includeInactive bool) ([]string, []int) {
		t.Helper()
		toks, sizes := storetest.Pages(t, size, func(after store.TokenCursor) ([]store.EnrollmentToken, error) {
			return f.Tokens.List(f.Ctx, after, size, includeInactive)
		}, func(last store.EnrollmentToken) store.TokenCursor {
			return store.TokenCursor{CreatedAt: last.CreatedAt, ID: last.ID}
		})
		var got []string
		for _, tok := range toks {
			got = append(got, tok.ID)
		}
		return got, sizes
	}
	// Oldest first: creation order, whatever the random ids.
	got, sizes := list(false)
	if !slices.Equal(got, want) || !slices.Equal(sizes, []int{5, 5, 2}) {
		t.Fatalf("listed %v in pages %v\nwant %v in [5 5 2]", got, sizes, want)
	}

	// Used, revoked and expired tokens only when inactive ones are asked for.
	used := f.Issue(t, time.Hour)
	_, err := f.Enroll.Enroll(f.Ctx, used.Text.Reveal(), enrollmenttest.NewCSR(t), "node.test:7443")
	errdefstest.Must(t, err)
	_, err = f.Tokens.Revoke(f.Ctx, want[4])
	errdefstest.Must(t, err)
	expired := f.ExpiredToken(t)
	got, _ = list(false)
	if wantActive := slices.Delete(slices.Clone(want), 4, 5); !slices.Equal(got, wantActive) {
		t.Errorf("active tokens %v\nwant %v", got, wantActive)
	}
	got, _ = list(true)
	if wantAll := append(slices.Clone(want), used.Token.ID, expired); !slices.Equal(got, wantAll) {
		t.Errorf("all tokens %v\nwant %v", got, wantAll)
	}

	// A limit outside the store's bounds is refused, naming it.
	for _, limit := range []int{0, -1} {
		_, err = f.Tokens.List(f.Ctx, store.TokenCursor{}, limit, false)
		errdefstest.WantField(t, err, "limit")
	}
}

func TestRevokeEnrollmentToken(t *testing.T) {
	f := enrollmenttest.New(t)
	issued := f.Issue(t, time.Hour)
	id := issued.Token.ID
	first, err := f.Tokens.Revoke(f.Ctx, id)
	errdefstest.Must(t, err)
	if first.RevokedAt == nil || first.ID != issued.Token.ID {
		t.Fatalf("revoked token %+v", first)
	}
	again, err := f.Tokens.Revoke(f.Ctx, id)
	errdefstest.Must(t, err)
	if again.RevokedAt == nil || !again.RevokedAt.Equal(*first.RevokedAt) {
		t.Errorf("second revocation changed the time: %v then %v", first.RevokedAt, again.RevokedAt)
	}
	_, err = f.Enroll.Enroll(f.Ctx, issued.Text.Reveal(), enrollmenttest.NewCSR(t), "node.test:7443")
	errdefstest.WantClass(t, err, enrollment.ErrRejected)

	// Expired: unchanged.
	expired := f.ExpiredToken(t)
	tok, err := f.Tokens.Revoke(f.Ctx, expired)
	errdefstest.Must(t, err)
	if !tok.Expired || tok.RevokedAt != nil {
		t.Errorf("revoking an expired token gave %+v", tok)
	}
	// Used: refused.
	used := f.Issue(t, time.Hour)
	_, err = f.Enroll.Enroll(f.Ctx, used.Text.Reveal(), enrollmenttest.NewCSR(t), "node.test:7443")
	errdefstest.Must(t, err)
	_, err = f.Tokens.Revoke(f.Ctx, used.Token.ID)
	errdefstest.WantClass(t, err, errdefs.ErrFailedPrecondition)

	_, err = f.Tokens.Revoke(f.Ctx, strings.Repeat("ab", 16))
	errdefstest.WantClass(t, err, errdefs.ErrNotFound)
}

// allTokens lists every stored token, used, revoked and expired ones too.
func allTokens(t *testing.T, f enrollmenttest.Fixture) []store.EnrollmentToken {
	t.Helper()
	page, err := f.Tokens.List(f.Ctx, store.TokenCursor{}, store.MaxPageSize, true)
	errdefstest.Must(t, err)
	return page
}
