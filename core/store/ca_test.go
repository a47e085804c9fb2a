package store_test

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"berth.dev/core/store"
	"berth.dev/sandbox/errdefs"
)

func testCA(t *testing.T) store.CA {
	return store.CA{
		CertificatePEM: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
		KeyCiphertext:  randomBytes(t, 138),
		KeyNonce:       randomBytes(t, 12),
	}
}

func TestSaveCAOnce(t *testing.T) {
	st, ctx := newStore(t)
	_, err := st.LoadCA(ctx)
	wantClass(t, err, errdefs.ErrNotFound)

	ca := testCA(t)
	saved, err := st.SaveCA(ctx, ca)
	must(t, err)
	if saved.CertificatePEM != ca.CertificatePEM || string(saved.KeyCiphertext) != string(ca.KeyCiphertext) ||
		string(saved.KeyNonce) != string(ca.KeyNonce) || saved.CreatedAt.IsZero() {
		t.Fatalf("saved %v", saved)
	}
	// The same CA again (a retried save): the stored one.
	again, err := st.SaveCA(ctx, ca)
	must(t, err)
	if !again.CreatedAt.Equal(saved.CreatedAt) {
		t.Errorf("retry returned a CA created at %v, want %v", again.CreatedAt, saved.CreatedAt)
	}
	// Another CA: refused; the first stays.
	_, err = st.SaveCA(ctx, testCA(t))
	wantClass(t, err, errdefs.ErrExists)
	loaded, err := st.LoadCA(ctx)
	must(t, err)
	if string(loaded.KeyCiphertext) != string(ca.KeyCiphertext) {
		t.Error("LoadCA returned another CA than the first saved")
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(verb, loaded); strings.Contains(out, hex.EncodeToString(ca.KeyCiphertext[:8])) ||
			strings.Contains(out, fmt.Sprintf("%d", ca.KeyCiphertext[:8])[1:10]) {
			t.Errorf("%s prints the key ciphertext: %s", verb, out)
		}
	}
}

func TestSaveCAValidates(t *testing.T) {
	st, ctx := newStore(t)
	for _, mutate := range []func(*store.CA){
		func(ca *store.CA) { ca.CertificatePEM = "not PEM" },
		func(ca *store.CA) { ca.KeyCiphertext = nil },
		func(ca *store.CA) { ca.KeyNonce = ca.KeyNonce[:8] },
	} {
		ca := testCA(t)
		mutate(&ca)
		_, err := st.SaveCA(ctx, ca)
		wantClass(t, err, errdefs.ErrInvalid)
	}
}
