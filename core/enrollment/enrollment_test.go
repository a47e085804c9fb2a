package enrollment_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/platform/nodetls"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/enrollment"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

func setup(t *testing.T) (*enrollment.Service, *storetest.Owned, *nodetls.CA) {
	st := storetest.Owner(t, storetest.New(t))
	ca, err := nodetls.NewCA(uuid.NewString(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return enrollment.NewService(st, ca, time.Now, uuid.New), st, ca
}

func token(t *testing.T, st *storetest.Owned, ca *nodetls.CA, ttl time.Duration) string {
	text, id, hash, _, err := nodetls.NewToken(ca.Fingerprint(), time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateEnrollmentToken(context.Background(), id, hash, ttl); err != nil {
		t.Fatal(err)
	}
	return text
}

func csr(t *testing.T) []byte {
	key, err := nodetls.NewNodeKey()
	if err != nil {
		t.Fatal(err)
	}
	der, err := nodetls.NewCSR(key, uuid.NewString())
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func TestEnrollOnceThenReplayWithTheSameKeyOnly(t *testing.T) {
	svc, st, ca := setup(t)
	ctx := context.Background()
	tok, req := token(t, st, ca, time.Hour), csr(t)
	first, err := svc.Enroll(ctx, tok, req, "node1.test:7443")
	if err != nil || first.Replayed {
		t.Fatalf("first enrollment: %+v, %v", first, err)
	}
	node, err := st.GetNode(ctx, first.NodeID)
	if err != nil || node.State != store.NodeEnrolled || node.AdvertiseAddress != "node1.test:7443" {
		t.Fatalf("recorded node: %+v, %v", node, err)
	}
	again, err := svc.Enroll(ctx, tok, req, "node1.test:7443")
	if err != nil || !again.Replayed || again.NodeID != first.NodeID || string(again.CertificateDER) != string(first.CertificateDER) {
		t.Fatalf("replay with the same key: %+v, %v", again, err)
	}
	if _, err := svc.Enroll(ctx, tok, csr(t), "node2.test:7443"); !errors.Is(err, enrollment.ErrRejected) {
		t.Fatalf("token reused with another key: %v", err)
	}
	// A retired node never enrolls again, even by replay.
	if _, err := st.SetNodeState(ctx, first.NodeID, store.NodeEnrolled, store.NodeRetired, store.NewAdminProvenance(uuid.New()), uuid.New()); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Enroll(ctx, tok, req, "node1.test:7443"); !errors.Is(err, enrollment.ErrRejected) {
		t.Fatalf("retired node replayed: %v", err)
	}
}

func TestEnrollRejects(t *testing.T) {
	svc, st, ca := setup(t)
	ctx := context.Background()
	other, _ := nodetls.NewCA(uuid.NewString(), time.Now())
	foreignText, foreignID, foreignHash, _, _ := nodetls.NewToken(other.Fingerprint(), time.Now(), time.Hour)
	if _, err := st.CreateEnrollmentToken(ctx, foreignID, foreignHash, time.Hour); err != nil {
		t.Fatal(err)
	}
	expired := token(t, st, ca, time.Microsecond)
	revoked := token(t, st, ca, time.Hour)
	revokedTok, _ := nodetls.ParseToken(revoked)
	if _, err := st.RevokeEnrollmentToken(ctx, revokedTok.ID()); err != nil {
		t.Fatal(err)
	}
	unknown, _, _, _, _ := nodetls.NewToken(ca.Fingerprint(), time.Now(), time.Hour)
	time.Sleep(5 * time.Millisecond)
	for name, tok := range map[string]string{
		"expired": expired, "revoked": revoked, "never issued": unknown, "another CA's token": foreignText,
	} {
		_, err := svc.Enroll(ctx, tok, csr(t), "node.test:7443")
		if !errors.Is(err, enrollment.ErrRejected) {
			t.Errorf("%s: %v", name, err)
		} else if err.Error() != enrollment.ErrRejected.Error() {
			t.Errorf("%s: refusal text %q says more than the fixed one", name, err)
		}
	}
	good := token(t, st, ca, time.Hour)
	for name, c := range map[string]struct {
		tok, addr string
		csr       []byte
	}{
		"malformed token":  {"berth-enroll-v1.nope", "n:1", csr(t)},
		"garbage csr":      {good, "n:1", []byte("not a csr")},
		"address no port":  {good, "node.test", csr(t)},
		"address too long": {good, string(make([]byte, 300)) + ":1", csr(t)},
	} {
		if _, err := svc.Enroll(ctx, c.tok, c.csr, c.addr); !errdefs.IsInvalid(err) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The good token is still unused after those refusals.
	if _, err := svc.Enroll(ctx, good, csr(t), "node.test:7443"); err != nil {
		t.Fatalf("valid enrollment after refusals: %v", err)
	}
}
