package daemon

import (
	"context"
	"fmt"
	"time"

	"berth.dev/platform/nodetls"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/secrets"
	"berth.dev/core/store"
)

// loadOrCreateCA loads the installation CA, opening its key with the master
// key, or creates and stores it on first start.
func loadOrCreateCA(ctx context.Context, st *store.Store, key secrets.Key, installationID string) (*nodetls.CA, error) {
	ad := secrets.InstallationCAKey(installationID)
	stored, err := st.LoadCA(ctx)
	if errdefs.IsNotFound(err) {
		ca, err := nodetls.NewCA(installationID, time.Now())
		if err != nil {
			return nil, fmt.Errorf("new CA: %w", err)
		}
		certPEM, keyPEM, err := nodetls.MarshalCA(ca)
		if err != nil {
			return nil, fmt.Errorf("marshal CA: %w", err)
		}
		nonce, ct, err := key.Seal(keyPEM, ad)
		if err != nil {
			return nil, err
		}
		if _, err := st.SaveCA(ctx, store.CA{CertificatePEM: string(certPEM), KeyCiphertext: ct, KeyNonce: nonce}); err != nil {
			if !errdefs.IsExists(err) {
				return nil, fmt.Errorf("save CA: %w", err)
			}
			return loadOrCreateCA(ctx, st, key, installationID)
		}
		return ca, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	keyPEM, err := key.Open(stored.KeyNonce, stored.KeyCiphertext, ad)
	if err != nil {
		return nil, fmt.Errorf("installation CA key: %w", err)
	}
	ca, err := nodetls.ParseCA([]byte(stored.CertificatePEM), keyPEM)
	if err != nil {
		return nil, fmt.Errorf("installation CA: %w", err)
	}
	if ca.InstallationID() != installationID {
		return nil, errdefs.Invalid("installation_ca", "belongs to another installation")
	}
	return ca, nil
}
