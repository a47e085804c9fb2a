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
// snapshots (findOthers, removeOthers). For the first incarnation it
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
	var containerID string
	tombstone, foreign, foreignName := false, false, false
	switch c, err := p.inspectName(ctx, ref); {
	case err == nil && p.isTombstone(ref, c):
		tombstone = true
	case err == nil:
		containerID = c.ID
	case errdefs.IsNotFound(err):
	case errdefs.IsOwnership(err):
		foreign, foreignName = true, true
	default:
		return fmt.Errorf("kill: inspect container: %w", errdefs.ErrComputeUnconfirmed)
	}
	volumes := []string{p.HomeVolume(ref), p.EnvironmentVolume(ref)}
	var present []string
	for _, name := range volumes {
		switch owned, err := p.volumeOwned(ctx, ref, name); {
		case err != nil && errdefs.IsNotFound(err):
		case err != nil && errdefs.IsOwnership(err):
			foreign = true
		case err != nil:
			return fmt.Errorf("kill: inspect volume: %w", errdefs.ErrComputeUnconfirmed)
		case owned:
			present = append(present, name)
		}
	}
	if foreign {
		if foreignName && len(present) == 0 {
			// Another's container holds ref's name, so no container of
			// ref's can exist there, and no volume of ref's first
			// incarnation does. ref's later incarnations and snapshots
			// (a suspension removed the first incarnation before the name
			// was taken) are still ref's to remove.
			return p.removeOthers(ctx, others)
		}
		return fmt.Errorf("kill: %w", errdefs.ErrOwnership)
	}
	if tombstone {
		// The names are claimed: no Create of ref can make anything any
		// more, and the volumes present are the tombstone's, empty and
		// pinned by it.
		return p.removeOthers(ctx, others)
	}

	// Remove by the inspected id, never by name, so a container that took
	// the name since the check is never touched.
	if containerID != "" {
		_, err := p.cli.ContainerRemove(ctx, containerID, client.ContainerRemoveOptions{Force: true})
		if err != nil && classify(err) != outcomeNotFound {
			return fmt.Errorf("kill: remove container: %w", errdefs.ErrComputeUnconfirmed)
		}
	}
	for _, name := range present {
		_, err := p.cli.VolumeRemove(ctx, name, client.VolumeRemoveOptions{})
		if err != nil && classify(err) != outcomeNotFound {
			return fmt.Errorf("kill: remove volume: %w", errdefs.ErrComputeUnconfirmed)
		}
	}

	if containerID == "" && others.empty() && !req.CreateSettled {
		// No container: Create may still be in flight. Claim the names.
		if err := p.placeTombstone(ctx, ref); err != nil {
			return fmt.Errorf("kill: %w", err)
		}
		return p.confirmTombstone(ctx, ref)
	}

	// Confirm absence of all three.
	if _, err := p.cli.ContainerInspect(ctx, p.Name(ref), client.ContainerInspectOptions{}); err == nil || classify(err) != outcomeNotFound {
		return fmt.Errorf("kill: confirm container absence: %w", errdefs.ErrComputeUnconfirmed)
	}
	for _, name := range volumes {
		if _, err := p.cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{}); err == nil || classify(err) != outcomeNotFound {
			return fmt.Errorf("kill: confirm volume absence: %w", errdefs.ErrComputeUnconfirmed)
		}
	}
	p.forget(p.Name(ref))
	return p.removeOthers(ctx, others)
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
	cs, err := p.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter})
	if err != nil {
		return others{}, fmt.Errorf("list containers: %w", errdefs.ErrComputeUnconfirmed)
	}
	var containers []string
	for _, c := range cs.Items {
		if slices.Contains(c.Names, "/"+first) {
			continue
		}
		if !p.owns(ref, c.Labels) {
			return others{}, errdefs.ErrOwnership
		}
		if c.Labels[LabelTombstone] == "1" {
			// A restore target's claim (KillCompute): it stays until the
			// engine proves it unneeded (Housekeep), like the first's.
			continue
		}
		containers = append(containers, c.ID)
	}
	vs, err := p.cli.VolumeList(ctx, client.VolumeListOptions{Filters: filter})
	if err != nil {
		return others{}, fmt.Errorf("list volumes: %w", errdefs.ErrComputeUnconfirmed)
	}
	var volumes []string
	for _, v := range vs.Items {
		if group, _ := volumeGroup(v.Name); group == first {
			continue
		}
		if !p.owns(ref, v.Labels) {
			return others{}, errdefs.ErrOwnership
		}
		if v.Labels[LabelTombstone] == "1" {
			continue // a claimed restore target's (above)
		}
		volumes = append(volumes, v.Name)
	}
	recorded := p.recordedGroups(ref)
	for _, group := range recorded {
		if group == first {
			continue
		}
		for _, name := range []string{group + homeSuffix, group + environmentSuffix} {
			switch labels, err := p.ownedVolumeLabels(ctx, ref, name); {
			case err == nil && labels[LabelTombstone] == "1":
				// A claimed restore target's volume whose labels the engine
				// kept: it stays with its tombstone (above).
			case err == nil && !slices.Contains(volumes, name):
				volumes = append(volumes, name)
			case err != nil && errdefs.IsOwnership(err):
				return others{}, errdefs.ErrOwnership
			case err != nil && !errdefs.IsNotFound(err):
				return others{}, fmt.Errorf("inspect volume: %w", errdefs.ErrComputeUnconfirmed)
			}
		}
	}
	var groups []string
	for _, group := range recorded {
		if group != first {
			groups = append(groups, group)
		}
	}
	return others{containers: containers, volumes: volumes, groups: groups}, nil
}

// removeOthers removes what findOthers found: the containers, then the
// volumes, then forgets their groups' records.
func (p *Provider) removeOthers(ctx context.Context, o others) error {
	for _, id := range o.containers {
		if _, err := p.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil && classify(err) != outcomeNotFound {
			return fmt.Errorf("kill: remove container: %w", errdefs.ErrComputeUnconfirmed)
		}
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
