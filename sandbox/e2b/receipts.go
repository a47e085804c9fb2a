package e2b

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"berth.dev/sandbox"
	"berth.dev/sandbox/atomicfile"
)

// createReceipt is the adapter's record of a create POST that began:
// written (0600, fsynced) before the POST, removed once the create is
// settled (a complete answer, or the settlement rule of doc.go). It
// holds identifiers and a time only, never a key or token.
type createReceipt struct {
	Version      int       `json:"version"`
	Installation string    `json:"installation"`
	Tenant       string    `json:"tenant"`
	Environment  string    `json:"environment"`
	Allocation   string    `json:"allocation"`
	StartedAt    time.Time `json:"started_at"`
}

const receiptVersion = 1

// privateDir creates dir (and its parents) and makes dir itself 0700.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

// receiptPath is ref's receipt file; the allocation id is a validated
// canonical UUID.
func (p *Provider) receiptPath(ref sandbox.Reference) string {
	return filepath.Join(p.receipts, ref.AllocationID+".json")
}

// writeReceipt records that ref's create POST begins at at.
func (p *Provider) writeReceipt(ref sandbox.Reference, at time.Time) error {
	data, err := json.Marshal(createReceipt{
		Version: receiptVersion, Installation: p.installation, Tenant: ref.TenantID,
		Environment: ref.EnvironmentID, Allocation: ref.AllocationID, StartedAt: at.UTC(),
	})
	if err != nil {
		return err
	}
	return atomicfile.Write(p.receiptPath(ref), data, 0o600)
}

// readReceipt returns ref's receipt; ok is false when there is none. A
// receipt of another Reference or installation under the same
// allocation id is an error (never taken for ref's).
func (p *Provider) readReceipt(ref sandbox.Reference) (r createReceipt, ok bool, err error) {
	data, err := os.ReadFile(p.receiptPath(ref))
	if errors.Is(err, fs.ErrNotExist) {
		return createReceipt{}, false, nil
	}
	if err != nil {
		return createReceipt{}, false, err
	}
	if json.Unmarshal(data, &r) != nil || r.Version != receiptVersion || r.Installation != p.installation ||
		r.Tenant != ref.TenantID || r.Environment != ref.EnvironmentID || r.Allocation != ref.AllocationID {
		return createReceipt{}, false, errors.New("malformed create receipt")
	}
	return r, true, nil
}

// dropReceipt removes ref's receipt once its create is settled.
func (p *Provider) dropReceipt(ref sandbox.Reference) error {
	err := os.Remove(p.receiptPath(ref))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// settle answers an observation that lists no sandbox of ref (doc.go,
// "Settling an unknown Create"). The caller holds ref's turn, so no
// Create of this adapter about ref runs. Without a receipt no create
// POST of this installation for ref is unsettled: absence receipt. With
// one that began SettleAfter ago or more, the POST can no longer commit:
// the receipt goes and the absence receipt is given. Otherwise the
// creation stays unknown (ErrNotFound, a missing observation only).
func (p *Provider) settle(ref sandbox.Reference) (sandbox.Info, error) {
	r, ok, err := p.readReceipt(ref)
	switch {
	case err != nil:
		return sandbox.Info{}, errUnavailable
	case !ok:
		return receipt(ref), nil
	case p.now().Sub(r.StartedAt) < SettleAfter:
		return sandbox.Info{}, errUnsettled
	}
	if err := p.dropReceipt(ref); err != nil {
		return sandbox.Info{}, errUnavailable
	}
	p.log.Info("e2b create settled absent by the settlement bound", "allocation", ref.AllocationID)
	return receipt(ref), nil
}
