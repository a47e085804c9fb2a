package docker

import (
	"context"
	"fmt"
	"slices"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// inspectOwned reads ref's live container (not its tombstone) and checks
// its ownership. It returns ErrNotFound (also for a tombstone, which is no
// compute), ErrOwnership, or ErrObservationUnavailable for an unknown
// outcome.
func (p *Provider) inspectOwned(ctx context.Context, ref sandbox.Reference) (container.InspectResponse, error) {
	c, err := p.inspectName(ctx, ref)
	if err != nil {
		return container.InspectResponse{}, err
	}
	if p.isTombstone(ref, c) {
		return container.InspectResponse{}, errdefs.ErrNotFound
	}
	return c, nil
}

// inspectName reads the container holding ref's name, which is ref's
// container or its tombstone, and checks its ownership. It returns
// ErrNotFound, ErrOwnership, or ErrObservationUnavailable for an unknown
// outcome.
func (p *Provider) inspectName(ctx context.Context, ref sandbox.Reference) (container.InspectResponse, error) {
	c, err := p.inspectContainer(ctx, p.Name(ref))
	if err != nil {
		return container.InspectResponse{}, err
	}
	if !p.owns(ref, labelsOf(c)) {
		return container.InspectResponse{}, errdefs.ErrOwnership
	}
	return c, nil
}

// inspectContainer reads the container named name, unchecked: ErrNotFound
// when there is none, ErrObservationUnavailable for any other failure.
// Every caller checks the labels it requires before it trusts or touches
// the container.
func (p *Provider) inspectContainer(ctx context.Context, name string) (container.InspectResponse, error) {
	res, err := p.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	switch {
	case err == nil:
		return res.Container, nil
	case classify(err) == outcomeNotFound:
		return container.InspectResponse{}, errdefs.ErrNotFound
	default:
		return container.InspectResponse{}, errdefs.ErrObservationUnavailable
	}
}

// info translates an owned container into Info. A container that has been
// started has passed the bootstrap's final mutating step, and its creation
// can no longer change anything. ref's tombstone is the absence receipt:
// no compute, creation settled (tombstone.go).
func (p *Provider) info(ref sandbox.Reference, c container.InspectResponse) sandbox.Info {
	if p.isTombstone(ref, c) {
		return sandbox.Info{Reference: ref, State: sandbox.StateAbsent, CreateSettled: true}
	}
	info := sandbox.Info{Reference: ref, ProviderID: c.ID, State: sandbox.StateStopped}
	if c.State == nil {
		return info
	}
	switch c.State.Status {
	case container.StateCreated:
		info.State = sandbox.StateCreated
	case container.StateRunning, container.StateRestarting:
		info.State = sandbox.StateRunning
	case container.StatePaused:
		info.State = sandbox.StatePaused
	}
	started := c.State.StartedAt != "" && c.State.StartedAt != "0001-01-01T00:00:00Z"
	info.BootstrapComplete = started
	info.CreateSettled = started
	return info
}

// GetInfo observes ref's container without changing it. When ref's name
// is held by its tombstone it returns the absence receipt (State absent,
// CreateSettled, no native id).
func (p *Provider) GetInfo(ctx context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	if err := p.ops.Check(sandbox.OpGetInfo); err != nil {
		return sandbox.Info{}, err
	}
	if err := ref.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	c, err := p.inspectName(ctx, ref)
	if err != nil {
		return sandbox.Info{}, fmt.Errorf("get info: %w", err)
	}
	return p.info(ref, c), nil
}

// Renew only observes: Docker has no lease, and Renew never revives a
// stopped container.
func (p *Provider) Renew(ctx context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	if err := p.ops.Check(sandbox.OpRenew); err != nil {
		return sandbox.Info{}, err
	}
	if err := ref.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	c, err := p.inspectName(ctx, ref)
	if err != nil {
		return sandbox.Info{}, fmt.Errorf("renew: %w", renewErr(err))
	}
	return p.info(ref, c), nil
}

// renewErr classifies a failed Renew like any lease mutation: without an
// answer it may have extended something, so the outcome is unknown (the
// node transport classifies it the same way).
func renewErr(err error) error {
	if errdefs.IsObservationUnavailable(err) {
		return errdefs.ErrComputeUnconfirmed
	}
	return err
}

// Kill removes ref's first incarnation, then its later incarnations and
// snapshots (findOthers, removeOthers); the others' containers go before
// the first incarnation's volumes, which a seeder or a copier cut short
// still mounts. For the first incarnation it
// checks the ownership labels of the container and both volumes before
// removing any of them, and removes what exists. When ref's container
// existed, or a later incarnation or snapshot did (only a settled,
// running first incarnation is ever captured, so Create is long over), it
// then confirms that all three are gone. Otherwise Create may still be in
// flight, so Kill claims ref's names with a tombstone (tombstone.go) and
// confirms that the tombstone holds them; a Kill that finds the tombstone
// has nothing left to do but the others. Confirmed cleanup succeeds, so a
// repeated Kill does too; a repeat after one that removed everything but
// whose answer was lost finds no evidence and places a tombstone (one
// never-started container and two empty volumes that pin the names).
// When Core says the creation is settled (req.CreateSettled: it observed
// the started container or holds a receipt), no request of the original
// attempt can change anything, and Kill places no tombstone: it only
// removes what it found and confirms all three absent. A tombstone already
// there stays (it may be the very receipt Core holds).
//
// A foreign resource (one without every ownership label of ref) under one
// of ref's names is never touched. When a foreign container holds ref's
// name and no owned volume of the first incarnation exists, Kill removes
// ref's later incarnations and snapshots (whatever holds the first name)
// and otherwise changes nothing; it places no tombstone over a foreign
// name, so this settles no creation (GetInfo then reports ErrOwnership,
// never a receipt). Otherwise (owned resources beside a foreign one, or a
// foreign volume under a free container name, where a tombstone would
// mount it) Kill touches nothing and returns ErrOwnership.
func (p *Provider) Kill(ctx context.Context, req sandbox.KillRequest) error {
	if err := p.ops.Check(sandbox.OpKill); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return err
	}
	ref := req.Reference
	// The later incarnations and the snapshots of ref (checkpoint.go) are
	// found first and removed last: while one exists, ref's Create
	// certainly completed (only a settled, running first incarnation is
	// ever captured), so a missing first container needs no tombstone.
	others, err := p.findOthers(ctx, ref)
	if err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	// Check everything first: a foreign resource stops the whole cleanup.
	first, err := p.inspectFirst(ctx, ref)
	if err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	if first.foreign {
		if first.foreignName && len(first.present) == 0 {
			// Another's container holds ref's name, so no container of
			// ref's can exist there, and no volume of ref's first
			// incarnation does. ref's later incarnations and snapshots
			// (a suspension removed the first incarnation before the name
			// was taken) are still ref's to remove.
			return p.removeOthers(ctx, others)
		}
		return fmt.Errorf("kill: %w", errdefs.ErrOwnership)
	}
	if first.tombstone {
		// The names are claimed: no Create of ref can make anything any
		// more, and the volumes present are the tombstone's, empty and
		// pinned by it.
		return p.removeOthers(ctx, others)
	}
	// A seeded Create cut short leaves its seeder, and a Capture cut short
	// its copier (capture.go): both mount the first incarnation's volumes,
	// which the engine refuses to remove while a container uses them, so
	// every other container goes first (the others' volumes stay for
	// removeOthers).
	if err := p.removeSeeder(ctx, others.seeder); err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	if err := p.removeContainers(ctx, others.containers); err != nil {
		return err
	}
	if err := p.removeFirst(ctx, first); err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	if first.containerID == "" && others.empty() && !req.CreateSettled {
		// No container: Create may still be in flight. Claim the names.
		if err := p.placeTombstone(ctx, ref); err != nil {
			return fmt.Errorf("kill: %w", err)
		}
		return p.confirmTombstone(ctx, ref)
	}
	if err := p.confirmFirstAbsent(ctx, ref, first.volumes); err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	p.forget(p.Name(ref))
	return p.removeOthers(ctx, others)
}

// firstIncarnation is what Kill found under the names of ref's first
// incarnation before it changes anything.
type firstIncarnation struct {
	// containerID is ref's owned container, "" when there is none (or the
	// name holds ref's tombstone or a foreign container).
	containerID string
	// tombstone: ref's tombstone holds the container name.
	tombstone bool
	// foreign: a resource without every ownership label of ref holds one
	// of the names; foreignName: that resource is the container.
	foreign, foreignName bool
	// volumes are both volume names of the first incarnation; present the
	// owned ones that exist.
	volumes, present []string
}

// inspectFirst reads the container and both volumes of ref's first
// incarnation, without changing anything, so Kill can refuse on a foreign
// resource before its first removal. Any failure to observe is
// ErrComputeUnconfirmed: Kill cannot tell what it would leave behind.
func (p *Provider) inspectFirst(ctx context.Context, ref sandbox.Reference) (firstIncarnation, error) {
	var first firstIncarnation
	switch c, err := p.inspectName(ctx, ref); {
	case err == nil && p.isTombstone(ref, c):
		first.tombstone = true
	case err == nil:
		first.containerID = c.ID
	case errdefs.IsNotFound(err):
	case errdefs.IsOwnership(err):
		first.foreign, first.foreignName = true, true
	default:
		return firstIncarnation{}, fmt.Errorf("inspect container: %w", errdefs.ErrComputeUnconfirmed)
	}
	first.volumes = []string{p.HomeVolume(ref), p.EnvironmentVolume(ref)}
	for _, name := range first.volumes {
		switch owned, err := p.volumeOwned(ctx, ref, name); {
		case err != nil && errdefs.IsNotFound(err):
		case err != nil && errdefs.IsOwnership(err):
			first.foreign = true
		case err != nil:
			return firstIncarnation{}, fmt.Errorf("inspect volume: %w", errdefs.ErrComputeUnconfirmed)
		case owned:
			first.present = append(first.present, name)
		}
	}
	return first, nil
}

// removeFirst removes the owned container and volumes inspectFirst found.
// The container goes by its inspected id, never by name, so a container
// that took the name since the check is never touched. Already gone is
// success.
func (p *Provider) removeFirst(ctx context.Context, first firstIncarnation) error {
	if first.containerID != "" {
		_, err := p.cli.ContainerRemove(ctx, first.containerID, client.ContainerRemoveOptions{Force: true})
		if err != nil && classify(err) != outcomeNotFound {
			return fmt.Errorf("remove container: %w", errdefs.ErrComputeUnconfirmed)
		}
	}
	for _, name := range first.present {
		_, err := p.cli.VolumeRemove(ctx, name, client.VolumeRemoveOptions{})
		if err != nil && classify(err) != outcomeNotFound {
			return fmt.Errorf("remove volume: %w", errdefs.ErrComputeUnconfirmed)
		}
	}
	return nil
}

// confirmFirstAbsent asks the engine again for ref's container name and
// both volumes, so Kill reports success only when the engine says all
// three are gone (a removal whose answer was lost proves nothing).
func (p *Provider) confirmFirstAbsent(ctx context.Context, ref sandbox.Reference, volumes []string) error {
	if _, err := p.cli.ContainerInspect(ctx, p.Name(ref), client.ContainerInspectOptions{}); err == nil || classify(err) != outcomeNotFound {
		return fmt.Errorf("confirm container absence: %w", errdefs.ErrComputeUnconfirmed)
	}
	for _, name := range volumes {
		if _, err := p.cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{}); err == nil || classify(err) != outcomeNotFound {
			return fmt.Errorf("confirm volume absence: %w", errdefs.ErrComputeUnconfirmed)
		}
	}
	return nil
}

// volumeOwned reads a volume of ref: (true, nil) when it exists and is
// owned (labelled, or unlabelled while ref's names are recorded:
// intents.go), ErrNotFound, ErrOwnership, or ErrObservationUnavailable.
func (p *Provider) volumeOwned(ctx context.Context, ref sandbox.Reference, name string) (bool, error) {
	_, err := p.ownedVolumeLabels(ctx, ref, name)
	return err == nil, err
}

// ownedVolumeLabels is volumeOwned that also returns the volume's labels.
func (p *Provider) ownedVolumeLabels(ctx context.Context, ref sandbox.Reference, name string) (map[string]string, error) {
	v, err := p.cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
	switch {
	case err == nil:
	case classify(err) == outcomeNotFound:
		return nil, errdefs.ErrNotFound
	default:
		return nil, errdefs.ErrObservationUnavailable
	}
	if !p.volumeIsOwned(ref, name, v.Volume.Labels) {
		return nil, errdefs.ErrOwnership
	}
	return v.Volume.Labels, nil
}

// others are ref's resources other than its first incarnation (Create's
// container and volumes, which Kill handles with the tombstone): the later
// incarnations and the snapshots.
type others struct {
	containers, volumes []string
	// groups are the volume groups recorded for them (intents.go),
	// forgotten once removed.
	groups []string
	// seeder is the id of the first incarnation's seeder (seed.go), ""
	// when there is none. It is no evidence that Create completed (a
	// seeded Create runs it before it starts the container), so empty
	// does not count it.
	seeder string
}

func (o others) empty() bool { return len(o.containers) == 0 && len(o.volumes) == 0 }

// findOthers finds ref's others by ref's allocation and installation
// labels, each checked for every ownership label of ref, and the
// unlabelled volumes of groups recorded for ref (intents.go). A resource
// carrying ref's labels but not all of them stops it before any change
// (ErrOwnership).
func (p *Provider) findOthers(ctx context.Context, ref sandbox.Reference) (others, error) {
	filter := client.Filters{}.Add("label", LabelAllocation+"="+ref.AllocationID).Add("label", LabelInstallation+"="+p.opts.InstallationID)
	first := p.Name(ref)
	containers, seeder, err := p.otherContainers(ctx, ref, filter, first)
	if err != nil {
		return others{}, err
	}
	volumes, err := p.otherVolumes(ctx, ref, filter, first)
	if err != nil {
		return others{}, err
	}
	recorded := p.recordedGroups(ref)
	volumes, err = p.recordedVolumes(ctx, ref, recorded, first, volumes)
	if err != nil {
		return others{}, err
	}
	var groups []string
	for _, group := range recorded {
		if group != first {
			groups = append(groups, group)
		}
	}
	return others{containers: containers, volumes: volumes, groups: groups, seeder: seeder}, nil
}

// otherContainers lists the containers carrying ref's allocation and
// installation labels, except the one named first and claimed restore
// targets, and returns first's seeder (seed.go) apart. One without every
// ownership label of ref is ErrOwnership.
func (p *Provider) otherContainers(ctx context.Context, ref sandbox.Reference, filter client.Filters, first string) (containers []string, seeder string, err error) {
	cs, err := p.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter})
	if err != nil {
		return nil, "", fmt.Errorf("list containers: %w", errdefs.ErrComputeUnconfirmed)
	}
	for _, c := range cs.Items {
		if slices.Contains(c.Names, "/"+first) {
			continue
		}
		if !p.owns(ref, c.Labels) {
			return nil, "", errdefs.ErrOwnership
		}
		switch {
		case c.Labels[LabelTombstone] == "1":
			// A restore target's claim (KillCompute): it stays until the
			// engine proves it unneeded (Housekeep), like the first's.
		case slices.Contains(c.Names, "/"+first+seederSuffix) && c.Labels[LabelSnapshotRole] == roleSeeder:
			seeder = c.ID
		default:
			containers = append(containers, c.ID)
		}
	}
	return containers, seeder, nil
}

// otherVolumes lists the labelled volumes of ref outside the first
// incarnation's group, except claimed restore targets'. One without every
// ownership label of ref is ErrOwnership.
func (p *Provider) otherVolumes(ctx context.Context, ref sandbox.Reference, filter client.Filters, first string) ([]string, error) {
	vs, err := p.cli.VolumeList(ctx, client.VolumeListOptions{Filters: filter})
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", errdefs.ErrComputeUnconfirmed)
	}
	var volumes []string
	for _, v := range vs.Items {
		if group, _ := volumeGroup(v.Name); group == first {
			continue
		}
		if !p.owns(ref, v.Labels) {
			return nil, errdefs.ErrOwnership
		}
		if v.Labels[LabelTombstone] == "1" {
			continue // a claimed restore target's (otherContainers)
		}
		volumes = append(volumes, v.Name)
	}
	return volumes, nil
}

// recordedVolumes adds to volumes the existing volumes of the groups
// recorded for ref (intents.go) other than first: a full data root makes
// the engine keep a volume without its labels, so the label filter of
// otherVolumes misses it and only the record proves it ref's.
func (p *Provider) recordedVolumes(ctx context.Context, ref sandbox.Reference, recorded []string, first string, volumes []string) ([]string, error) {
	for _, group := range recorded {
		if group == first {
			continue
		}
		for _, name := range []string{group + homeSuffix, group + environmentSuffix} {
			switch labels, err := p.ownedVolumeLabels(ctx, ref, name); {
			case err == nil && labels[LabelTombstone] == "1":
				// A claimed restore target's volume whose labels the engine
				// kept: it stays with its tombstone (otherContainers).
			case err == nil && !slices.Contains(volumes, name):
				volumes = append(volumes, name)
			case err != nil && errdefs.IsOwnership(err):
				return nil, errdefs.ErrOwnership
			case err != nil && !errdefs.IsNotFound(err):
				return nil, fmt.Errorf("inspect volume: %w", errdefs.ErrComputeUnconfirmed)
			}
		}
	}
	return volumes, nil
}

// removeContainers removes the containers ids (already gone is success).
func (p *Provider) removeContainers(ctx context.Context, ids []string) error {
	for _, id := range ids {
		if _, err := p.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil && classify(err) != outcomeNotFound {
			return fmt.Errorf("kill: remove container: %w", errdefs.ErrComputeUnconfirmed)
		}
	}
	return nil
}

// removeOthers removes what findOthers found: a seeder (again, when Kill
// already removed it), the containers, then the volumes, then forgets
// their groups' records.
func (p *Provider) removeOthers(ctx context.Context, o others) error {
	if err := p.removeSeeder(ctx, o.seeder); err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	if err := p.removeContainers(ctx, o.containers); err != nil {
		return err
	}
	for _, name := range o.volumes {
		if _, err := p.cli.VolumeRemove(ctx, name, client.VolumeRemoveOptions{}); err != nil && classify(err) != outcomeNotFound {
			return fmt.Errorf("kill: remove volume: %w", errdefs.ErrComputeUnconfirmed)
		}
	}
	for _, group := range o.groups {
		p.forget(group)
	}
	return nil
}
