package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"path"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// The container's fixed settings (the guide's container_options).
const (
	RuntimeUser     = "1000:1000"
	runtimeUID      = 1000
	PidsLimit       = 128
	TmpfsOptions    = "rw,nosuid,nodev,size=128m,mode=1777"
	HomeMount       = "/home"
	EnvironmentPath = "/environment"
	WorkspacePath   = "/workspace"
	// WorkspaceSubpath is the environment volume's subdirectory mounted at
	// /workspace.
	WorkspaceSubpath = "workspace"
	runtimeBinary    = runtimebootstrap.BinaryPath
)

// environmentDirs are created, owned by the Runtime user, in the
// environment volume before the Runtime starts.
var environmentDirs = []string{"workspace", "staging", "initialization", "packages"}

// nestedMaskedPaths stay masked with nested_sandbox.
var nestedMaskedPaths = []string{"/sys/firmware", "/sys/devices/virtual/powercap"}

// RuntimeCommand is the Runtime's start command.
func RuntimeCommand() []string {
	return []string{runtimeBinary, "connect", "--profile", "default", "--bootstrap-file", runtimebootstrap.Path}
}

// Create creates ref's volumes and container with the fixed settings,
// verifies the engine applied the configured CPU, memory and image, copies
// the bootstrap file and the environment directories in, and starts the
// Runtime. It never reuses an existing container or retained volume.
func (p *Provider) Create(ctx context.Context, req sandbox.CreateRequest) (sandbox.Info, error) {
	if err := p.ops.Check(sandbox.OpCreate); err != nil {
		return sandbox.Info{}, err
	}
	if err := req.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	return p.create(ctx, req, nil)
}

// create is Create's work, and CreateSeeded's with a seed (seed.go): the
// seed's copy then replaces the environment archive, and the home archive
// (the child's bootstrap) is written over the copied home.
func (p *Provider) create(ctx context.Context, req sandbox.CreateRequest, seed *seedSource) (sandbox.Info, error) {
	ref := req.Reference
	bootstrap, err := runtimebootstrap.Encode(req.Bootstrap)
	if err != nil {
		return sandbox.Info{}, errdefs.Invalid("bootstrap", "invalid runtime bootstrap file")
	}
	// Registered before the first look at the engine: a tombstone placed
	// after this is seen by refuseExisting, and none is placed while this
	// runs (tombstone.go).
	defer p.startCreate(ref)()
	if info, err := p.refuseExisting(ctx, ref); err != nil {
		return info, err
	}

	// From a sent request on, a failure may leave resources: return the
	// Reference so Core keeps ownership and cleans up through Kill.
	partial := sandbox.Info{Reference: ref}
	if sent, err := p.createVolumes(ctx, ref, p.Name(ref), p.computeLabels(ref, 1)); err != nil {
		if !sent {
			// Nothing was asked of the engine: the attempt is settled.
			return sandbox.Info{Reference: ref, State: sandbox.StateAbsent, CreateSettled: true}, fmt.Errorf("create: %w", err)
		}
		return partial, err
	}

	created, err := p.cli.ContainerCreate(ctx, p.ContainerCreateOptions(ref, req.Resources))
	if err != nil {
		return partial, createErr("create container", err)
	}
	partial.ProviderID = created.ID
	partial.State = sandbox.StateCreated

	inspected, err := p.cli.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{})
	if err != nil {
		return partial, createErr("inspect created container", err)
	}
	if !p.applied(inspected.Container, req.Resources) {
		// The engine ignored the limits or resolved another image: creation
		// is settled (nothing more will happen), but the container is unfit.
		settled := partial
		settled.CreateSettled = true
		return settled, fmt.Errorf("create container: engine did not apply the configured limits or image: %w", errdefs.ErrInvalid)
	}

	copies := []struct {
		dest string
		tar  func() ([]byte, error)
	}{
		{HomeMount, func() ([]byte, error) { return homeArchive(bootstrap, req.CoreCA) }},
		{EnvironmentPath, environmentArchive},
	}
	if seed != nil {
		if err := p.copySeed(ctx, ref, *seed); err != nil {
			return partial, err
		}
		copies = copies[:1]
	}
	for _, copy := range copies {
		archive, err := copy.tar()
		if err != nil {
			return partial, fmt.Errorf("build archive: %w", errdefs.ErrComputeUnconfirmed)
		}
		if _, err := p.cli.CopyToContainer(ctx, created.ID, client.CopyToContainerOptions{
			DestinationPath: copy.dest, Content: bytes.NewReader(archive),
		}); err != nil {
			return partial, createErr("copy bootstrap files", err)
		}
	}

	if _, err := p.cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return partial, createErr("start runtime", err)
	}
	return sandbox.Info{
		Reference: ref, ProviderID: created.ID, State: sandbox.StateRunning,
		BootstrapComplete: true, CreateSettled: true,
	}, nil
}

// createVolumes is the one volume step of Create and Resume: it records
// group's two volume names for ref (intents.go), then asks the engine for
// each, labelled with labels. The engine answers an existing name with the
// existing volume: one that appeared since the caller's check is not ours
// to use, so createVolumes refuses it (ErrOwnership) and drops the group's
// record, so that Kill never takes that volume for ref's. sent is false
// when the record failed and nothing was asked of the engine.
func (p *Provider) createVolumes(ctx context.Context, ref sandbox.Reference, group string, labels map[string]string) (sent bool, err error) {
	if err := p.record(ref, group); err != nil {
		return false, err
	}
	for _, name := range []string{group + homeSuffix, group + environmentSuffix} {
		res, err := p.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Driver: "local", Labels: labels})
		if err != nil {
			return true, createErr("create volume", err)
		}
		if !p.owns(ref, res.Volume.Labels) {
			p.forget(group)
			return true, fmt.Errorf("create volume: %w", errdefs.ErrOwnership)
		}
	}
	return true, nil
}

// createErr maps a failed mutation of Create. A definite rejection is
// still reported as unconfirmed when earlier steps already created
// resources, because the allocation now holds them either way.
func createErr(step string, err error) error {
	switch classify(err) {
	case outcomeConflict:
		return fmt.Errorf("%s: %w", step, errdefs.ErrExists)
	default:
		return fmt.Errorf("%s: %w", step, errdefs.ErrComputeUnconfirmed)
	}
}

// refuseExisting checks that neither the container nor a retained volume of
// ref exists; an existing one is ErrExists when owned, ErrOwnership when not.
// When ref's name is held by its tombstone it also returns the absence
// receipt: no Create of ref can make anything any more. A foreign resource
// returns the absence receipt with ErrOwnership too: this attempt, the
// only one Core sends for ref, ends here before any mutation, so it never
// made and never will make anything.
func (p *Provider) refuseExisting(ctx context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	c, err := p.cli.ContainerInspect(ctx, p.Name(ref), client.ContainerInspectOptions{})
	switch {
	case err == nil && p.isTombstone(ref, c.Container):
		return sandbox.Info{Reference: ref, State: sandbox.StateAbsent, CreateSettled: true},
			fmt.Errorf("create: name held by the allocation's tombstone: %w", errdefs.ErrExists)
	case err == nil:
		return refused(ref, p.owns(ref, labelsOf(c.Container)))
	case classify(err) != outcomeNotFound:
		return sandbox.Info{}, fmt.Errorf("create: check existing container: %w", errdefs.ErrObservationUnavailable)
	}
	for _, name := range []string{p.HomeVolume(ref), p.EnvironmentVolume(ref)} {
		v, err := p.cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
		switch {
		case err == nil:
			return refused(ref, p.volumeIsOwned(ref, name, v.Volume.Labels))
		case classify(err) != outcomeNotFound:
			return sandbox.Info{}, fmt.Errorf("create: check retained volumes: %w", errdefs.ErrObservationUnavailable)
		}
	}
	return sandbox.Info{}, nil
}

// refused is Create's answer for an existing resource under one of ref's
// names, before any mutation: ErrExists when it is owned (no receipt: it
// may be the work of another call), or ErrOwnership with the absence
// receipt when it is foreign.
func refused(ref sandbox.Reference, owned bool) (sandbox.Info, error) {
	if owned {
		return sandbox.Info{}, fmt.Errorf("create: %w", errdefs.ErrExists)
	}
	return sandbox.Info{Reference: ref, State: sandbox.StateAbsent, CreateSettled: true},
		fmt.Errorf("create: %w", errdefs.ErrOwnership)
}

func labelsOf(c container.InspectResponse) map[string]string {
	if c.Config == nil {
		return nil
	}
	return c.Config.Labels
}

// ContainerCreateOptions is the container request Create sends for ref
// with res: name, image, user, command, labels, and every fixed setting
// (read-only root, dropped capabilities, seccomp, limits, tmpfs, the
// volume and subpath mounts, network). Benchmarks build their engine
// baseline from it, so that the baseline creates the very same container.
func (p *Provider) ContainerCreateOptions(ref sandbox.Reference, res sandbox.Resources) client.ContainerCreateOptions {
	return p.computeCreateOptions(sandbox.Compute{Reference: ref, Generation: 1, Name: p.Name(ref)}, res)
}

// computeCreateOptions is the container request of incarnation c: the
// same settings for every generation, c's name, c's own volume group and
// c's labels (ownership and generation).
func (p *Provider) computeCreateOptions(c sandbox.Compute, res sandbox.Resources) client.ContainerCreateOptions {
	labels := p.computeLabels(c.Reference, c.Generation)
	return client.ContainerCreateOptions{
		Name:       c.Name,
		Config:     p.containerConfig(labels),
		HostConfig: p.hostConfig(c.Name, labels, res),
	}
}

func (p *Provider) containerConfig(labels map[string]string) *container.Config {
	return &container.Config{
		Image:      p.opts.Config.Image,
		User:       RuntimeUser,
		Cmd:        RuntimeCommand(),
		WorkingDir: WorkspacePath,
		Labels:     labels,
	}
}

// hostConfig mounts group's volumes (group+"-home", group+"-environment").
func (p *Provider) hostConfig(group string, labels map[string]string, res sandbox.Resources) *container.HostConfig {
	pids := int64(PidsLimit)
	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode(p.opts.Config.Network),
		ExtraHosts:     append([]string(nil), p.opts.Config.ExtraHosts...),
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt: []string{
			"no-new-privileges:true",
			"seccomp=" + string(p.opts.Seccomp),
			"apparmor=unconfined",
		},
		Tmpfs: map[string]string{"/tmp": TmpfsOptions},
		// The mounts carry the ownership labels: a volume that a Kill
		// racing this Create removed between the volume creates and the
		// container create is created again by the engine, and must then
		// still be owned, so that the next Kill can remove it.
		Mounts: []mount.Mount{
			{
				Type: mount.TypeVolume, Source: group + homeSuffix, Target: HomeMount,
				VolumeOptions: &mount.VolumeOptions{Labels: labels},
			},
			{
				Type: mount.TypeVolume, Source: group + environmentSuffix, Target: EnvironmentPath,
				VolumeOptions: &mount.VolumeOptions{Labels: labels},
			},
			{
				Type: mount.TypeVolume, Source: group + environmentSuffix, Target: WorkspacePath,
				VolumeOptions: &mount.VolumeOptions{Subpath: WorkspaceSubpath, Labels: labels},
			},
		},
		Resources: container.Resources{
			NanoCPUs:   res.CPUMillis * 1_000_000,
			Memory:     res.MemoryBytes,
			MemorySwap: res.MemoryBytes,
			PidsLimit:  &pids,
		},
	}
	if p.opts.Config.NestedSandbox {
		init := true
		hc.Init = &init
		hc.MaskedPaths = append([]string(nil), nestedMaskedPaths...)
		hc.ReadonlyPaths = []string{}
	}
	return hc
}

// applied reports whether the created container has the configured CPU,
// memory and exact image.
func (p *Provider) applied(c container.InspectResponse, res sandbox.Resources) bool {
	return c.HostConfig != nil &&
		c.HostConfig.NanoCPUs == res.CPUMillis*1_000_000 &&
		c.HostConfig.Memory == res.MemoryBytes &&
		c.Image == p.opts.Config.Image
}

// homeArchive holds /home/runtime (0700), the bootstrap file (0600) and
// beside it the CA the Runtime trusts for Core's https URL
// (runtimebootstrap.CAFile, 0644; empty when Core gives none, which also
// replaces the file a restored home volume kept), owned by the Runtime
// user.
func homeArchive(bootstrap, coreCA []byte) ([]byte, error) {
	dir := path.Dir(runtimebootstrap.Path) // /home/runtime
	rel := path.Base(dir)
	return buildTar([]tarEntry{
		{name: rel + "/", mode: 0o700, dir: true},
		{name: rel + "/" + path.Base(runtimebootstrap.Path), mode: 0o600, data: bootstrap},
		{name: rel + "/" + runtimebootstrap.CAFile, mode: 0o644, data: coreCA},
	})
}

// environmentArchive holds the environment volume's directories.
func environmentArchive() ([]byte, error) {
	entries := make([]tarEntry, 0, len(environmentDirs))
	for _, d := range environmentDirs {
		entries = append(entries, tarEntry{name: d + "/", mode: 0o755, dir: true})
	}
	return buildTar(entries)
}

type tarEntry struct {
	name string
	mode int64
	dir  bool
	data []byte
}

func buildTar(entries []tarEntry) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name: e.name, Mode: e.mode, Uid: runtimeUID, Gid: runtimeUID,
			ModTime: time.Unix(0, 0), Format: tar.FormatPAX,
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
