package docker

import (
	"context"
	"fmt"

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

// tombstoneEntrypoint is a path no image has: a tombstone started by
// anyone fails at exec and runs nothing.
const tombstoneEntrypoint = "/berth-tombstone-is-never-started"

// isTombstone reports whether c, a container holding ref's name, is ref's
// tombstone.
func (p *Provider) isTombstone(ref sandbox.Reference, c container.InspectResponse) bool {
	labels := labelsOf(c)
	return p.owns(ref, labels) && labels[LabelTombstone] == "1"
}

func (p *Provider) tombstoneLabels(ref sandbox.Reference) map[string]string {
	labels := p.Labels(ref)
	labels[LabelTombstone] = "1"
	return labels
}

// placeTombstone creates ref's tombstone: never started, no network, no
// capabilities, a read-only root filesystem, the configured image (the one
// image the node is known to hold) and ref's two volume names mounted, so
// the engine creates them, empty and labelled, when they do not exist and
// refuses to remove them while the tombstone holds them. Any failure,
// also a name conflict (something took the name since Kill looked), is
// ErrComputeUnconfirmed: the next Kill looks again.
func (p *Provider) placeTombstone(ctx context.Context, ref sandbox.Reference) error {
	// The engine creates the volumes the tombstone mounts, as it does
	// Create's: their names are recorded first (intents.go).
	if err := p.record(ref, p.Name(ref)); err != nil {
		return fmt.Errorf("claim name: %w", errdefs.ErrComputeUnconfirmed)
	}
	labels := p.tombstoneLabels(ref)
	volume := func(name, target string) mount.Mount {
		return mount.Mount{
			Type: mount.TypeVolume, Source: name, Target: target,
			VolumeOptions: &mount.VolumeOptions{Labels: p.tombstoneLabels(ref)},
		}
	}
	_, err := p.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: p.Name(ref),
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
				volume(p.HomeVolume(ref), HomeMount),
				volume(p.EnvironmentVolume(ref), EnvironmentPath),
			},
		},
	})
	if err != nil {
		return fmt.Errorf("claim name: %w", errdefs.ErrComputeUnconfirmed)
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
	volumes := []string{p.HomeVolume(ref), p.EnvironmentVolume(ref)}
	labelled := true
	for _, name := range volumes {
		v, err := p.cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
		if err != nil || !p.volumeIsOwned(ref, name, v.Volume.Labels) {
			return fmt.Errorf("kill: confirm tombstone volumes: %w", errdefs.ErrComputeUnconfirmed)
		}
		labelled = labelled && p.owns(ref, v.Volume.Labels)
	}
	if labelled {
		p.forget(p.Name(ref))
	}
	return nil
}
