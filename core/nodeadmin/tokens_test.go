package nodeadmin_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/nodetls"

	"berth.dev/core/admin/admintest"
	"berth.dev/core/enrollment"
	"berth.dev/core/nodeadmin"
)

func TestCreateEnrollmentToken(t *testing.T) {
	f := newFixture(t)
	issued, err := f.svc.CreateEnrollmentToken(f.ctx, uuid.NewString(), 90*time.Minute)
	admintest.Must(t, err)
	tok, err := nodetls.ParseToken(issued.Text.Reveal())
	if err != nil {
		t.Fatalf("token text does not parse: %v", err)
	}
	if tok.ID() != issued.Token.ID || tok.CAFingerprint() != f.ca.Fingerprint() {
		t.Fatalf("token text names id %s and CA %s, want %s and %s", tok.ID(), tok.CAFingerprint(), issued.Token.ID, f.ca.Fingerprint())
	}
	if got := f.storedSecretHash(t, tok.ID()); !bytes.Equal(got, tok.SecretHash()) {
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
	res, err := f.enroll.Enroll(f.ctx, issued.Text.Reveal(), newCSR(t), "node.test:7443")
	admintest.Must(t, err)
	used, err := f.st.GetEnrollmentToken(f.ctx, rec.ID)
	admintest.Must(t, err)
	if used.NodeID == nil || *used.NodeID != res.NodeID {
		t.Fatalf("token used by %v, want node %v", used.NodeID, res.NodeID)
	}
}

func TestCreateEnrollmentTokenRetry(t *testing.T) {
	f := newFixture(t)
	req := uuid.NewString()
	first, err := f.svc.CreateEnrollmentToken(f.ctx, req, time.Hour)
	admintest.Must(t, err)
	// The response was lost: the retry re-issues the same token.
	second, err := f.svc.CreateEnrollmentToken(f.ctx, req, time.Hour)
	admintest.Must(t, err)
	if second.Token.ID != first.Token.ID || !second.Token.ExpiresAt.Equal(first.Token.ExpiresAt) {
		t.Fatalf("retry gave token %s expiring %v, want %s expiring %v",
			second.Token.ID, second.Token.ExpiresAt, first.Token.ID, first.Token.ExpiresAt)
	}
	if second.Text.Reveal() == first.Text.Reveal() {
		t.Fatal("retry returned the same text: Core cannot know it")
	}
	tok, err := nodetls.ParseToken(second.Text.Reveal())
	admintest.Must(t, err)
	if tok.ID() != first.Token.ID || !bytes.Equal(f.storedSecretHash(t, tok.ID()), tok.SecretHash()) {
		t.Fatal("the retry's text is not what the store now checks")
	}
	page, _, err := f.svc.ListEnrollmentTokens(f.ctx, 0, "", true)
	admintest.Must(t, err)
	if len(page) != 1 {
		t.Fatalf("%d tokens after a retry, want 1", len(page))
	}
	// The earlier text stops working; the new one enrolls.
	_, err = f.enroll.Enroll(f.ctx, first.Text.Reveal(), newCSR(t), "node.test:7443")
	admintest.WantClass(t, err, enrollment.ErrRejected)
	_, err = f.enroll.Enroll(f.ctx, second.Text.Reveal(), newCSR(t), "node.test:7443")
	admintest.Must(t, err)

	// Used meanwhile: refused, and the used token keeps its secret.
	hash := f.storedSecretHash(t, tok.ID())
	_, err = f.svc.CreateEnrollmentToken(f.ctx, req, time.Hour)
	admintest.WantClass(t, err, errdefs.ErrFailedPrecondition)
	if !bytes.Equal(f.storedSecretHash(t, tok.ID()), hash) {
		t.Fatal("a refused retry replaced the secret of a used token")
	}
	// The same request id with another ttl is another request.
	_, err = f.svc.CreateEnrollmentToken(f.ctx, req, 2*time.Hour)
	admintest.WantClass(t, err, errdefs.ErrExists)

	// Revoked meanwhile: refused.
	req2 := uuid.NewString()
	revoked, err := f.svc.CreateEnrollmentToken(f.ctx, req2, time.Hour)
	admintest.Must(t, err)
	_, err = f.svc.RevokeEnrollmentToken(f.ctx, "enrollmentTokens/"+revoked.Token.ID)
	admintest.Must(t, err)
	_, err = f.svc.CreateEnrollmentToken(f.ctx, req2, time.Hour)
	admintest.WantClass(t, err, errdefs.ErrFailedPrecondition)
}

func TestCreateEnrollmentTokenConcurrentRetries(t *testing.T) {
	f := newFixture(t)
	req := uuid.NewString()
	const calls = 6
	issued := make([]nodeadmin.IssuedToken, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() { issued[i], errs[i] = f.svc.CreateEnrollmentToken(f.ctx, req, time.Hour) })
	}
	wg.Wait()
	working := 0
	for i := range calls {
		admintest.Must(t, errs[i])
		if issued[i].Token.ID != issued[0].Token.ID {
			t.Fatalf("one request made tokens %s and %s", issued[0].Token.ID, issued[i].Token.ID)
		}
		tok, err := nodetls.ParseToken(issued[i].Text.Reveal())
		admintest.Must(t, err)
		if bytes.Equal(f.storedSecretHash(t, tok.ID()), tok.SecretHash()) {
			working++
		}
	}
	// Every answer but the last write's text has stopped working.
	if working != 1 {
		t.Errorf("%d of %d answers work, want exactly 1", working, calls)
	}
}

func TestCreateEnrollmentTokenValidates(t *testing.T) {
	f := newFixture(t)
	for name, id := range map[string]string{
		"empty":      "",
		"not a uuid": "request-1",
		"upper case": strings.ToUpper(uuid.NewString()),
		"braces":     "{" + uuid.NewString() + "}",
	} {
		_, err := f.svc.CreateEnrollmentToken(f.ctx, id, time.Hour)
		if err == nil {
			t.Fatalf("request_id %s accepted", name)
		}
		admintest.WantField(t, err, "request_id")
	}
	for _, ttl := range []time.Duration{0, -time.Hour, time.Second, time.Minute - time.Microsecond, nodetls.MaxTokenTTL + time.Second} {
		_, err := f.svc.CreateEnrollmentToken(f.ctx, uuid.NewString(), ttl)
		if err == nil {
			t.Fatalf("ttl %s accepted", ttl)
		}
		admintest.WantField(t, err, "ttl")
	}
	for _, ttl := range []time.Duration{nodeadmin.MinTokenTTL, nodeadmin.MaxTokenTTL} {
		issued, err := f.svc.CreateEnrollmentToken(f.ctx, uuid.NewString(), ttl)
		admintest.Must(t, err)
		if got := issued.Token.ExpiresAt.Sub(issued.Token.CreatedAt); got != ttl {
			t.Errorf("ttl %s stored as %s", ttl, got)
		}
	}
	page, _, err := f.svc.ListEnrollmentTokens(f.ctx, 0, "", true)
	admintest.Must(t, err)
	if len(page) != 2 {
		t.Errorf("%d tokens stored, want only the 2 valid requests'", len(page))
	}
}

func TestListEnrollmentTokens(t *testing.T) {
	f := newFixture(t)
	const total, size = 12, 5
	var want []string
	for range total {
		issued, err := f.svc.CreateEnrollmentToken(f.ctx, uuid.NewString(), time.Hour)
		admintest.Must(t, err)
		want = append(want, issued.Token.ID)
	}
	list := func(showInactive bool) ([]string, []int) {
		t.Helper()
		var got []string
		var sizes []int
		pageToken := ""
		for {
			page, next, err := f.svc.ListEnrollmentTokens(f.ctx, size, pageToken, showInactive)
			admintest.Must(t, err)
			sizes = append(sizes, len(page))
			for _, tok := range page {
				got = append(got, tok.ID)
			}
			if next == "" {
				return got, sizes
			}
			pageToken = next
		}
	}
	// Oldest first: creation order, whatever the random ids.
	got, sizes := list(false)
	if !slices.Equal(got, want) || !slices.Equal(sizes, []int{5, 5, 2}) {
		t.Fatalf("listed %v in pages %v\nwant %v in [5 5 2]", got, sizes, want)
	}

	// Used, revoked and expired tokens only with show_inactive.
	used := mustIssue(t, f, time.Hour)
	_, err := f.enroll.Enroll(f.ctx, used.Text.Reveal(), newCSR(t), "node.test:7443")
	admintest.Must(t, err)
	_, err = f.svc.RevokeEnrollmentToken(f.ctx, "enrollmentTokens/"+want[4])
	admintest.Must(t, err)
	expired := expiredToken(t, f)
	got, _ = list(false)
	if wantActive := slices.Delete(slices.Clone(want), 4, 5); !slices.Equal(got, wantActive) {
		t.Errorf("active tokens %v\nwant %v", got, wantActive)
	}
	got, _ = list(true)
	if wantAll := append(slices.Clone(want), used.Token.ID, expired); !slices.Equal(got, wantAll) {
		t.Errorf("all tokens %v\nwant %v", got, wantAll)
	}

	// Page tokens belong to one listing.
	_, next, err := f.svc.ListEnrollmentTokens(f.ctx, size, "", false)
	admintest.Must(t, err)
	_, _, err = f.svc.ListEnrollmentTokens(f.ctx, size, next, true)
	admintest.WantField(t, err, "page_token")
	_, _, err = f.svc.ListNodes(f.ctx, size, next, false)
	admintest.WantField(t, err, "page_token")
	_, _, err = f.svc.ListEnrollmentTokens(f.ctx, size, next[:len(next)-2], false)
	admintest.WantField(t, err, "page_token")
	_, _, err = f.svc.ListEnrollmentTokens(f.ctx, -1, "", false)
	admintest.WantField(t, err, "page_size")
}

func TestRevokeEnrollmentToken(t *testing.T) {
	f := newFixture(t)
	issued := mustIssue(t, f, time.Hour)
	name := "enrollmentTokens/" + issued.Token.ID
	first, err := f.svc.RevokeEnrollmentToken(f.ctx, name)
	admintest.Must(t, err)
	if first.RevokedAt == nil || first.ID != issued.Token.ID {
		t.Fatalf("revoked token %+v", first)
	}
	again, err := f.svc.RevokeEnrollmentToken(f.ctx, name)
	admintest.Must(t, err)
	if again.RevokedAt == nil || !again.RevokedAt.Equal(*first.RevokedAt) {
		t.Errorf("second revocation changed the time: %v then %v", first.RevokedAt, again.RevokedAt)
	}
	_, err = f.enroll.Enroll(f.ctx, issued.Text.Reveal(), newCSR(t), "node.test:7443")
	admintest.WantClass(t, err, enrollment.ErrRejected)

	// Expired: unchanged.
	expired := expiredToken(t, f)
	tok, err := f.svc.RevokeEnrollmentToken(f.ctx, "enrollmentTokens/"+expired)
	admintest.Must(t, err)
	if !tok.Expired || tok.RevokedAt != nil {
		t.Errorf("revoking an expired token gave %+v", tok)
	}
	// Used: refused.
	used := mustIssue(t, f, time.Hour)
	_, err = f.enroll.Enroll(f.ctx, used.Text.Reveal(), newCSR(t), "node.test:7443")
	admintest.Must(t, err)
	_, err = f.svc.RevokeEnrollmentToken(f.ctx, "enrollmentTokens/"+used.Token.ID)
	admintest.WantClass(t, err, errdefs.ErrFailedPrecondition)

	_, err = f.svc.RevokeEnrollmentToken(f.ctx, "enrollmentTokens/"+strings.Repeat("ab", 16))
	admintest.WantClass(t, err, errdefs.ErrNotFound)
	for _, bad := range []string{"", "enrollmentTokens/" + strings.Repeat("AB", 16), "nodes/" + uuid.NewString(), "enrollmentTokens/" + issued.Token.ID + "/x"} {
		_, err := f.svc.RevokeEnrollmentToken(f.ctx, bad)
		admintest.WantField(t, err, "name")
	}
}

func mustIssue(t *testing.T, f fixture, ttl time.Duration) nodeadmin.IssuedToken {
	t.Helper()
	issued, err := f.svc.CreateEnrollmentToken(f.ctx, uuid.NewString(), ttl)
	admintest.Must(t, err)
	return issued
}

// expiredToken stores a token that has expired by the database clock
// (lifetimes under MinTokenTTL exist only below the Service) and returns
// its id.
func expiredToken(t *testing.T, f fixture) string {
	t.Helper()
	_, id, hash, _, err := nodetls.NewToken(f.ca.Fingerprint(), time.Now(), time.Hour)
	admintest.Must(t, err)
	tok, err := f.st.CreateEnrollmentToken(f.ctx, id, hash, time.Microsecond)
	admintest.Must(t, err)
	if got, err := f.st.GetEnrollmentToken(f.ctx, tok.ID); err != nil || !got.Expired {
		t.Fatalf("token has not expired: %+v %v", got, err)
	}
	return id
}
