package enrollmenttest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/platform/nodetls"
	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/enrollment"
	"berth.dev/core/nodes"
	"berth.dev/core/store/storetest"
)

// Fixture is the enrollment token logic on a fresh database, with the
// enrollment service that consumes its tokens and the node registry that
// holds the nodes it enrolls.
type Fixture struct {
	Tokens   *enrollment.Tokens
	Enroll   *enrollment.Service
	Registry *nodes.Registry
	St       *storetest.Owned
	CA       *nodetls.CA
	Ctx      context.Context
}

// New returns a Fixture for a parallel test.
func New(t *testing.T) Fixture {
	t.Helper()
	base, ctx := storetest.Parallel(t)
	st := storetest.Owner(t, base)
	ca, err := nodetls.NewCA(uuid.NewString(), time.Now())
	errdefstest.Must(t, err)
	tokens, err := enrollment.NewTokens(st, ca.Fingerprint(), time.Now)
	errdefstest.Must(t, err)
	registry, err := nodes.NewRegistry(st, nodes.RegistryOptions{})
	errdefstest.Must(t, err)
	return Fixture{
		Tokens: tokens, Enroll: enrollment.NewService(st, ca, time.Now, uuid.New), Registry: registry,
		St: st, CA: ca, Ctx: ctx,
	}
}

// Issue creates a token of lifetime ttl under a new request id.
func (f Fixture) Issue(t *testing.T, ttl time.Duration) enrollment.IssuedToken {
	t.Helper()
	issued, err := f.Tokens.Create(f.Ctx, uuid.New(), ttl)
	errdefstest.Must(t, err)
	return issued
}

// EnrollNode enrolls a node with a new token, as berth-nodeagent enroll
// would, and returns its id and the token's id.
func (f Fixture) EnrollNode(t *testing.T) (uuid.UUID, string) {
	t.Helper()
	issued := f.Issue(t, time.Hour)
	res, err := f.Enroll.Enroll(f.Ctx, issued.Text.Reveal(), NewCSR(t), "node.test:7443")
	errdefstest.Must(t, err)
	return res.NodeID, issued.Token.ID
}

// NewCSR returns a signed certificate request of a new node key.
func NewCSR(t *testing.T) []byte {
	t.Helper()
	key, err := nodetls.NewNodeKey()
	errdefstest.Must(t, err)
	der, err := nodetls.NewCSR(key, uuid.NewString())
	errdefstest.Must(t, err)
	return der
}

// StoredSecretHash reads the secret hash the database holds for token id.
func (f Fixture) StoredSecretHash(t *testing.T, id string) []byte {
	t.Helper()
	var h []byte
	errdefstest.Must(t, f.St.Pool().QueryRow(f.Ctx, "SELECT secret_hash FROM enrollment_tokens WHERE id = $1", id).Scan(&h))
	return h
}

// ExpiredToken stores a token that has expired by the database clock
// (lifetimes under enrollment.MinTokenTTL exist only below the logic) and
// returns its id.
func (f Fixture) ExpiredToken(t *testing.T) string {
	t.Helper()
	_, id, hash, _, err := nodetls.NewToken(f.CA.Fingerprint(), time.Now(), time.Hour)
	errdefstest.Must(t, err)
	tok, err := f.St.CreateEnrollmentToken(f.Ctx, id, hash, time.Microsecond)
	errdefstest.Must(t, err)
	if got, err := f.St.GetEnrollmentToken(f.Ctx, tok.ID); err != nil || !got.Expired {
		t.Fatalf("token has not expired: %+v %v", got, err)
	}
	return id
}
