package docker

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"berth.dev/sandbox"
	"berth.dev/sandbox/atomicfile"
	"berth.dev/sandbox/errdefs"
)

// IntentsDirectory is the adapter's folder in the generation's state
// directory: buildLocal sets Options.IntentDirectory to it.
const IntentsDirectory = "docker-volume-intents"

// Volume intents: the adapter's record of the volume names it asks the
// engine to create, one file per volume group (a compute incarnation's
// container name, or a snapshot's; its volumes are the group's name plus
// "-home" and "-environment") holding the exact Reference, written before
// the requests. They exist
// because the engine's volume create is not atomic: the local driver
// makes the volume's directory before the engine writes its labels to the
// volume metadata database, and when that write fails (a full data root:
// ENOSPC on metadata.db) the create returns an error and leaves the volume
// behind without any label. Without a record no one could prove that
// volume Berth's, Kill would refuse it as foreign for ever, and the
// allocation would never settle (issue 14's full-disk defect).
//
// A record makes exactly one kind of volume owned besides a labelled one:
// a volume with no label at all in a group recorded for the same
// Reference. A volume that carries labels is judged by them alone, so a
// record never turns another tenant's or installation's volume into ref's.
// A group's record goes when its volumes are confirmed absent, or when
// ref's tombstone pins both with their labels.
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

// record durably notes, in one file named after group (the file and its
// folder synced), that ref asks for the group's two volume names, before
// the requests are sent. A failure is ErrFailedPrecondition: the caller
// sends nothing.
func (p *Provider) record(ref sandbox.Reference, group string) error {
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
	if err := atomicfile.Write(filepath.Join(p.opts.IntentDirectory, group), doc, 0o600); err != nil {
		return fmt.Errorf("record volume intent: %w", errdefs.ErrFailedPrecondition)
	}
	return nil
}

// recorded reports whether group is recorded for exactly ref.
func (p *Provider) recorded(ref sandbox.Reference, group string) bool {
	if p.opts.IntentDirectory == "" {
		return false
	}
	raw, err := os.ReadFile(filepath.Join(p.opts.IntentDirectory, group))
	if err != nil {
		return false
	}
	var got intent
	return json.Unmarshal(raw, &got) == nil && got == p.intentOf(ref)
}

// forget removes group's record, as far as it can: a record left behind
// (the state directory refusing the removal) only vouches for unlabelled
// volumes under names derived from ref, which only the adapter's calls for
// ref make.
func (p *Provider) forget(group string) {
	if p.opts.IntentDirectory != "" {
		_ = os.Remove(filepath.Join(p.opts.IntentDirectory, group))
	}
}

// volumeIsOwned is the ownership rule for a volume of ref: every
// ownership label of ref, or no label at all while the volume's group is
// recorded for ref (the volume intents above say why).
func (p *Provider) volumeIsOwned(ref sandbox.Reference, name string, labels map[string]string) bool {
	if len(labels) == 0 {
		group, ok := volumeGroup(name)
		return ok && p.recorded(ref, group)
	}
	return p.owns(ref, labels)
}

// volumeGroup is the group of a volume name: the name without its "-home"
// or "-environment" suffix.
func volumeGroup(name string) (string, bool) {
	for _, suffix := range []string{homeSuffix, environmentSuffix} {
		if group, ok := strings.CutSuffix(name, suffix); ok {
			return group, true
		}
	}
	return "", false
}

// recordedGroups lists the groups recorded for exactly ref.
func (p *Provider) recordedGroups(ref sandbox.Reference) []string {
	if p.opts.IntentDirectory == "" {
		return nil
	}
	entries, err := os.ReadDir(p.opts.IntentDirectory)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if p.recorded(ref, e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}
