package docker

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"berth.dev/sandbox"
	"berth.dev/sandbox/atomicfile"
	"berth.dev/sandbox/errdefs"
)

// IntentsDirectory is the adapter's folder in the generation's state
// directory: buildLocal sets Options.IntentDirectory to it.
const IntentsDirectory = "docker-volume-intents"

// Volume intents: the adapter's record of the volume names it asks the
// engine to create, one file per Reference named after its container and
// holding the exact Reference, written before the requests. They exist
// because the engine's volume create is not atomic: the local driver
// makes the volume's directory before the engine writes its labels to the
// volume metadata database, and when that write fails (a full data root:
// ENOSPC on metadata.db) the create returns an error and leaves the volume
// behind without any label. Without a record no one could prove that
// volume Berth's, Kill would refuse it as foreign for ever, and the
// allocation would never settle (issue 14's full-disk defect).
//
// A record makes exactly one kind of volume owned besides a labelled one:
// a volume with no label at all under one of the names of the Reference
// recorded. A volume that carries labels is judged by them alone, so a
// record never turns another tenant's or installation's volume into ref's.
// A record goes when Kill confirms ref's resources absent, or when ref's
// tombstone pins both volumes with their labels.
//
// Without a directory (a standalone adapter) nothing is recorded and
// nothing proved, so an unlabelled volume stays foreign.

// intent is a record's content.
type intent struct {
	Installation string `json:"installation"`
	Tenant       string `json:"tenant"`
	Environment  string `json:"environment"`
	Allocation   string `json:"allocation"`
}

func (p *Provider) intentOf(ref sandbox.Reference) intent {
	return intent{Installation: p.opts.InstallationID, Tenant: ref.TenantID, Environment: ref.EnvironmentID, Allocation: ref.AllocationID}
}

// record durably notes, in one file named after ref's container (the
// file and its folder synced), that ref asks for its two volume names,
// before the requests are sent. A failure is ErrFailedPrecondition: the
// caller sends nothing.
func (p *Provider) record(ref sandbox.Reference) error {
	if p.opts.IntentDirectory == "" {
		return nil
	}
	doc, err := json.Marshal(p.intentOf(ref))
	if err != nil {
		return fmt.Errorf("record volume intent: %w", errdefs.ErrFailedPrecondition)
	}
	if err := os.MkdirAll(p.opts.IntentDirectory, 0o700); err != nil {
		return fmt.Errorf("record volume intent: %w", errdefs.ErrFailedPrecondition)
	}
	if err := atomicfile.Write(filepath.Join(p.opts.IntentDirectory, p.Name(ref)), doc, 0o600); err != nil {
		return fmt.Errorf("record volume intent: %w", errdefs.ErrFailedPrecondition)
	}
	return nil
}

// recorded reports whether ref's volume names are recorded for exactly
// ref.
func (p *Provider) recorded(ref sandbox.Reference) bool {
	if p.opts.IntentDirectory == "" {
		return false
	}
	raw, err := os.ReadFile(filepath.Join(p.opts.IntentDirectory, p.Name(ref)))
	if err != nil {
		return false
	}
	var got intent
	return json.Unmarshal(raw, &got) == nil && got == p.intentOf(ref)
}

// forget removes ref's record, as far as it can: a record left behind
// (the state directory refusing the removal) only vouches for unlabelled
// volumes under ref's own derived names, which only ref's Create and
// Kill make.
func (p *Provider) forget(ref sandbox.Reference) {
	if p.opts.IntentDirectory != "" {
		_ = os.Remove(filepath.Join(p.opts.IntentDirectory, p.Name(ref)))
	}
}

// volumeIsOwned is the ownership rule for one of ref's volumes: every
// ownership label of ref, or no label at all while ref's names are
// recorded for ref (the volume intents above say why).
func (p *Provider) volumeIsOwned(ref sandbox.Reference, labels map[string]string) bool {
	if len(labels) == 0 {
		return p.recorded(ref)
	}
	return p.owns(ref, labels)
}
