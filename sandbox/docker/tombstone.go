package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// LabelTombstone marks ref's tombstone: a never-started container that
// Kill creates under ref's container name, mounting ref's two volume
// names, when it finds no container. It carries every ownership label
// too. Its existence is the creation-absence receipt (doc.go says why it
// is sound).
const LabelTombstone = "io.berth.tombstone"

// LabelTombstoneEngine records, on a tombstone, the identity of the
// engine process that was listening when Kill placed it
// ("<pid>:<start time>", or "unknown"): once that process has exited, no
// request of the original Create can reach the engine any more, and
// Housekeep removes the tombstone (doc.go, "Retention").
const LabelTombstoneEngine = "io.berth.tombstone-engine"

// tombstoneEntrypoint is a path no image has: a tombstone started by
// anyone fails at exec and runs nothing.
const tombstoneEntrypoint = "/berth-tombstone-is-never-started"

// isTombstone reports whether c, a container holding ref's name, is ref's
// tombstone.
func (p *Provider) isTombstone(ref sandbox.Reference, c container.InspectResponse) bool {
	labels := labelsOf(c)
	return p.owns(ref, labels) && labels[LabelTombstone] == "1"
}

// placeTombstone creates ref's tombstone: never started, no network, no
// capabilities, a read-only root filesystem, the configured image (the one
// image the node is known to hold) and ref's two volume names mounted, so
// the engine creates them, empty and labelled, when they do not exist and
// refuses to remove them while the tombstone holds them. Any failure,
// also a name conflict (something took the name since Kill looked), is
// ErrComputeUnconfirmed: the next Kill looks again.
//
// It places none while a Create of ref runs in this process (the node
// agent serializes the calls of one allocation, so only a direct caller
// meets this): ErrComputeUnconfirmed, and a later Kill places it. So the
// original attempt has ended, or its process has, before the tombstone
// exists, and every request it sent is at the engine listening now or at
// an earlier one: the identity recorded on the tombstone
// (LabelTombstoneEngine) is read before the tombstone is created.
func (p *Provider) placeTombstone(ctx context.Context, ref sandbox.Reference) error {
	if err := p.placeTombstoneAt(ctx, ref, p.Name(ref), p.Labels(ref)); err != nil {
		return fmt.Errorf("claim name: %w", err)
	}
	return nil
}

// placeTombstoneAt is placeTombstone for the name of any incarnation of
// ref (its group's volumes mounted), labelled with labels (ref's
// ownership labels, and an incarnation's generation) and the tombstone's:
// Kill's claim of the first incarnation, KillCompute's of a restore
// target. Every failure is ErrComputeUnconfirmed.
func (p *Provider) placeTombstoneAt(ctx context.Context, ref sandbox.Reference, name string, labels map[string]string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.creating[name] > 0 {
		return fmt.Errorf("the attempt that makes it is still running: %w", errdefs.ErrComputeUnconfirmed)
	}
	// The engine creates the volumes the tombstone mounts, as it does
	// Create's: their names are recorded first (intents.go).
	if err := p.record(ref, name); err != nil {
		return errdefs.ErrComputeUnconfirmed
	}
	// The container and its volumes record the engine: volumes left by
	// an interrupted removal are judged by the same proof (Housekeep).
	labels = maps.Clone(labels)
	labels[LabelTombstone] = "1"
	labels[LabelTombstoneEngine] = p.engineIdentity(ctx)
	volume := func(source, target string) mount.Mount {
		return mount.Mount{
			Type: mount.TypeVolume, Source: source, Target: target,
			VolumeOptions: &mount.VolumeOptions{Labels: maps.Clone(labels)},
		}
	}
	_, err := p.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image:           p.opts.Config.Image,
			User:            RuntimeUser,
			Entrypoint:      []string{tombstoneEntrypoint},
			Cmd:             []string{},
			Labels:          labels,
			NetworkDisabled: true,
		},
		HostConfig: &container.HostConfig{
			NetworkMode:    container.NetworkMode("none"),
			ReadonlyRootfs: true,
			CapDrop:        []string{"ALL"},
			SecurityOpt:    []string{"no-new-privileges:true"},
			Mounts: []mount.Mount{
				volume(name+homeSuffix, HomeMount),
				volume(name+environmentSuffix, EnvironmentPath),
			},
		},
	})
	if err != nil {
		return errdefs.ErrComputeUnconfirmed
	}
	return nil
}

// confirmTombstone confirms that ref's tombstone holds ref's name and
// that both volume names exist and are owned (the tombstone pins them).
// ref's record goes once both volumes carry ref's labels; a volume the
// engine left unlabelled keeps it, for as long as the tombstone pins it.
func (p *Provider) confirmTombstone(ctx context.Context, ref sandbox.Reference) error {
	c, err := p.inspectName(ctx, ref)
	if err != nil || !p.isTombstone(ref, c) {
		return fmt.Errorf("kill: confirm tombstone: %w", errdefs.ErrComputeUnconfirmed)
	}
	return p.confirmClaimedVolumes(ctx, ref, p.Name(ref), "kill")
}

// confirmClaimedVolumes confirms that the two volumes of a tombstone under
// name (ref's first incarnation's, or a restore target's) exist and are
// owned; the group's record goes once both carry ref's labels, and a
// volume the engine left unlabelled keeps it, for as long as the
// tombstone pins it.
func (p *Provider) confirmClaimedVolumes(ctx context.Context, ref sandbox.Reference, name, op string) error {
	labelled := true
	for _, v := range []string{name + homeSuffix, name + environmentSuffix} {
		res, err := p.cli.VolumeInspect(ctx, v, client.VolumeInspectOptions{})
		if err != nil || !p.volumeIsOwned(ref, v, res.Volume.Labels) {
			return fmt.Errorf("%s: confirm tombstone volumes: %w", op, errdefs.ErrComputeUnconfirmed)
		}
		labelled = labelled && p.owns(ref, res.Volume.Labels)
	}
	if labelled {
		p.forget(name)
	}
	return nil
}

// startCreate registers a Create of ref in progress in this process and
// returns its end.
func (p *Provider) startCreate(ref sandbox.Reference) (end func()) {
	return p.startCreateNamed(p.Name(ref))
}

// startCreateNamed registers an attempt in progress in this process that
// makes the incarnation named name (a Create, or a Resume into a restore
// target) and returns its end.
func (p *Provider) startCreateNamed(name string) (end func()) {
	p.mu.Lock()
	p.creating[name]++
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		if p.creating[name]--; p.creating[name] <= 0 {
			delete(p.creating, name)
		}
		p.mu.Unlock()
	}
}

// Housekeep removes the installation's tombstones that are no longer
// needed and returns how many it still holds. A tombstone is no longer
// needed once the engine process recorded on it has exited (doc.go,
// "Retention" says why that proves that no request of the original Create
// can reach the engine any more) and no Create of its Reference runs in
// this process. It then removes the tombstone by its id and its two
// volumes, after the ownership checks, and confirms them absent. A
// tombstone whose engine identity is unknown, or that fails any check,
// stays and is counted. Housekeep is the node agent's periodic call
// beside the probe; it reads and changes nothing else.
func (p *Provider) Housekeep(ctx context.Context) (held int, err error) {
	if p.cli == nil {
		return 0, nil
	}
	filter := client.Filters{}.Add("label", LabelInstallation+"="+p.opts.InstallationID).Add("label", LabelTombstone+"=1")
	list, err := p.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter})
	if err != nil {
		return 0, fmt.Errorf("housekeep: list tombstones: %w", errdefs.ErrObservationUnavailable)
	}
	current := p.engineIdentity(ctx)
	tombstones := map[string]bool{}
	for _, c := range list.Items {
		for _, n := range c.Names {
			tombstones[strings.TrimPrefix(n, "/")] = true
		}
		ref := sandbox.Reference{TenantID: c.Labels[LabelTenant], EnvironmentID: c.Labels[LabelEnvironment], AllocationID: c.Labels[LabelAllocation]}
		name, named := p.tombstoneName(ref, c.Labels)
		if ref.Validate() != nil || !p.owns(ref, c.Labels) || !named || !slices.Contains(c.Names, "/"+name) ||
			!engineGone(c.Labels[LabelTombstoneEngine], current) {
			held++
			continue
		}
		if rerr := p.removeTombstone(ctx, ref, name, c.ID); rerr != nil {
			held++
			if err == nil {
				err = rerr
			}
		}
	}
	// A removal cut short between the container and its volumes (the
	// agent stopped) leaves the two empty volumes without their
	// tombstone: they carry its labels and engine, and the same proof
	// removes them. Volumes whose tombstone still exists are its own.
	vs, verr := p.cli.VolumeList(ctx, client.VolumeListOptions{Filters: filter})
	if verr != nil {
		return held, errors.Join(err, fmt.Errorf("housekeep: list tombstone volumes: %w", errdefs.ErrObservationUnavailable))
	}
	for _, v := range vs.Items {
		group, ok := volumeGroup(v.Name)
		ref := sandbox.Reference{TenantID: v.Labels[LabelTenant], EnvironmentID: v.Labels[LabelEnvironment], AllocationID: v.Labels[LabelAllocation]}
		name, named := p.tombstoneName(ref, v.Labels)
		if !ok || tombstones[group] || ref.Validate() != nil || !p.owns(ref, v.Labels) || !named || group != name ||
			!engineGone(v.Labels[LabelTombstoneEngine], current) {
			continue
		}
		if rerr := p.removeTombstone(ctx, ref, name, ""); rerr != nil && err == nil {
			err = rerr
		}
	}
	return held, err
}

// tombstoneName is the name a tombstone of ref with labels must hold:
// ref's first incarnation's, or, with a generation label of 2 or more,
// that restore target's.
func (p *Provider) tombstoneName(ref sandbox.Reference, labels map[string]string) (string, bool) {
	g, ok := labels[LabelGeneration]
	if !ok {
		return p.Name(ref), true
	}
	gen, err := strconv.ParseUint(g, 10, 64)
	if err != nil || gen < 2 {
		return "", false
	}
	return p.ComputeName(ref, gen), true
}

// removeTombstone removes ref's tombstone id under name and its two
// volumes, unless an attempt that makes name runs in this process.
func (p *Provider) removeTombstone(ctx context.Context, ref sandbox.Reference, name, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.creating[name] > 0 {
		return fmt.Errorf("housekeep: the attempt that makes it is running: %w", errdefs.ErrComputeUnconfirmed)
	}
	// id is the listed tombstone, or "" for its left-over volumes: either
	// way the name must hold ref's tombstone or nothing.
	c, err := p.inspectContainer(ctx, name)
	switch {
	case errdefs.IsNotFound(err):
		if id != "" {
			return nil // removed since it was listed
		}
	case err != nil:
		return fmt.Errorf("housekeep: %w", err)
	case !p.isTombstone(ref, c) || c.ID != id:
		return fmt.Errorf("housekeep: %w", errdefs.ErrOwnership)
	}
	if err := p.removeGroup(ctx, ref, name, "housekeep", id); err != nil {
		return err
	}
	return nil
}
