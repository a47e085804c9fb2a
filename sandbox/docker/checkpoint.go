package docker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// Checkpoints are filesystem checkpoints (doc.go, "Checkpoints"): a
// snapshot holds copies of an incarnation's two volumes; a restore copies
// them into a new incarnation's volumes and starts a fresh Runtime. No
// process memory is captured (CRIU does not work on these hosts).

// The labels of incarnations and snapshots, besides the ownership labels.
const (
	// LabelGeneration carries an incarnation's compute generation (its
	// container and volumes).
	LabelGeneration = "io.berth.compute-generation"
	// LabelSnapshotOperation carries the Suspend or Capture operation id
	// on every resource of its snapshot.
	LabelSnapshotOperation = "io.berth.snapshot-operation"
	// LabelSnapshotRole is "capture" on the container that receives the
	// copy, "copier" on a Capture's helper that copies (capture.go) and
	// "holder" on the one created once the copy is complete.
	LabelSnapshotRole = "io.berth.snapshot-role"
	// LabelSnapshotDigest (holder only) is the SHA-256 of the copied
	// archives, in order home then environment.
	LabelSnapshotDigest = "io.berth.snapshot-digest"
	// LabelSnapshotSource (holder only) is the source's compute
	// generation.
	LabelSnapshotSource = "io.berth.snapshot-source-generation"
)

const (
	roleCapture = "capture"
	roleHolder  = "holder"
	// captureSuffix names a snapshot's capture container.
	captureSuffix = "-capture"
	// snapshotEntrypoint is a path no image has: the capture and holder
	// containers are never started, and one started by anyone runs
	// nothing.
	snapshotEntrypoint = "/berth-snapshot-is-never-started"
)

// computeLabels are the labels of ref's incarnation of generation gen.
func (p *Provider) computeLabels(ref sandbox.Reference, gen uint64) map[string]string {
	labels := p.Labels(ref)
	labels[LabelGeneration] = strconv.FormatUint(gen, 10)
	return labels
}

// ComputeName is the container name of ref's incarnation of generation
// gen: the first is Create's container (Name), the later ones carry their
// generation. Each incarnation's volumes are its name plus "-home" and
// "-environment".
func (p *Provider) ComputeName(ref sandbox.Reference, gen uint64) string {
	if gen == 1 {
		return p.Name(ref)
	}
	return fmt.Sprintf("%s-g%d", p.Name(ref), gen)
}

// SnapshotName is the name of the snapshot a Suspend under operationID
// makes for ref: its holder container, and with "-home" and
// "-environment" its volumes.
func (p *Provider) SnapshotName(ref sandbox.Reference, operationID string) string {
	return SnapshotResourceName(p.opts.InstallationID, ref, operationID)
}

// SnapshotResourceName derives the snapshot name of a Suspend of ref
// under operationID in an installation.
func SnapshotResourceName(installation string, ref sandbox.Reference, operationID string) string {
	sum := sha256.Sum256([]byte(operationID))
	return ResourceName(installation, ref) + "-s" + hex.EncodeToString(sum[:10])
}

// checkCompute validates c: a valid Reference, a generation from 1 and the
// generation's own name.
func (p *Provider) checkCompute(c sandbox.Compute) error {
	if err := c.Reference.Validate(); err != nil {
		return err
	}
	if c.Generation == 0 {
		return errdefs.Invalid("compute.generation", "must be at least 1")
	}
	if c.Name != p.ComputeName(c.Reference, c.Generation) {
		return errdefs.Invalid("compute.name", "is not the generation's incarnation name")
	}
	return nil
}

// checkOperation checks a Suspend or Resume before any native call: the
// declaration, the incarnation and a Core-persisted operation id.
func (p *Provider) checkOperation(op providercontract.Operation, c sandbox.Compute, operationID string) error {
	if err := p.ops.Check(op); err != nil {
		return err
	}
	if err := p.checkCompute(c); err != nil {
		return err
	}
	if operationID == "" {
		return errdefs.Invalid("operation_id", "is required")
	}
	return nil
}

// Initial returns ref's first incarnation: Create's container. It
// allocates nothing and reads nothing.
func (p *Provider) Initial(ref sandbox.Reference) (sandbox.Compute, error) {
	if err := p.ops.Check(sandbox.OpInitial); err != nil {
		return sandbox.Compute{}, err
	}
	if err := ref.Validate(); err != nil {
		return sandbox.Compute{}, err
	}
	return sandbox.Compute{Reference: ref, Generation: 1, Name: p.ComputeName(ref, 1)}, nil
}

// NewCompute returns the incarnation after previous. It allocates nothing
// and reads nothing.
func (p *Provider) NewCompute(previous sandbox.Compute) (sandbox.Compute, error) {
	if err := p.ops.Check(sandbox.OpNewCompute); err != nil {
		return sandbox.Compute{}, err
	}
	if err := p.checkCompute(previous); err != nil {
		return sandbox.Compute{}, err
	}
	gen := previous.Generation + 1
	return sandbox.Compute{Reference: previous.Reference, Generation: gen, Name: p.ComputeName(previous.Reference, gen)}, nil
}

// errOtherIncarnation is inspectCompute's answer when c's name is held by
// another container of the same generation than c.ID: c itself is gone.
var errOtherIncarnation = fmt.Errorf("another incarnation holds the name: %w", errdefs.ErrNotFound)

// inspectCompute reads incarnation c: the container under c's name with
// every ownership label of c's Reference and c's generation, and c.ID
// when c names one. ErrNotFound when nothing holds the name
// (errOtherIncarnation when an owned container of another id does),
// ErrOwnership for a foreign one, ErrObservationUnavailable for an
// unknown outcome.
func (p *Provider) inspectCompute(ctx context.Context, c sandbox.Compute) (container.InspectResponse, error) {
	ct, err := p.inspectContainer(ctx, c.Name)
	if err != nil {
		return container.InspectResponse{}, err
	}
	labels := labelsOf(ct)
	if !p.owns(c.Reference, labels) || labels[LabelGeneration] != strconv.FormatUint(c.Generation, 10) ||
		labels[LabelTombstone] != "" || labels[LabelSnapshotRole] != "" {
		return container.InspectResponse{}, errdefs.ErrOwnership
	}
	if c.ID != "" && ct.ID != c.ID {
		return container.InspectResponse{}, errOtherIncarnation
	}
	return ct, nil
}

// computeTombstone reads whether c's name is held by c's own tombstone
// (KillCompute's claim of a restore target: tombstone.go): every ownership
// label of c's Reference, c's generation and the tombstone label.
func (p *Provider) computeTombstone(ctx context.Context, c sandbox.Compute) (bool, error) {
	ct, err := p.inspectContainer(ctx, c.Name)
	switch {
	case errdefs.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	labels := labelsOf(ct)
	return p.owns(c.Reference, labels) && labels[LabelGeneration] == strconv.FormatUint(c.Generation, 10) &&
		labels[LabelTombstone] == "1", nil
}

// observeCompute is the observation of incarnation c that GetCompute and
// an observe-only Resume return: its instance, the absence receipt when
// c's tombstone holds its name, or State absent (only a missing
// observation) when nothing does.
func (p *Provider) observeCompute(ctx context.Context, c sandbox.Compute) (sandbox.ComputeInfo, error) {
	ct, err := p.inspectCompute(ctx, c)
	switch {
	case err == nil:
		return computeInfo(c, ct), nil
	case errdefs.IsOwnership(err):
		claimed, terr := p.computeTombstone(ctx, c)
		if terr != nil {
			return sandbox.ComputeInfo{}, terr
		}
		if claimed {
			c.ID = ""
			return sandbox.ComputeInfo{Compute: c, State: sandbox.ComputeAbsent, AbsenceReceipt: true}, nil
		}
		return sandbox.ComputeInfo{}, err
	case errdefs.IsNotFound(err):
		return sandbox.ComputeInfo{Compute: c, State: sandbox.ComputeAbsent}, nil
	default:
		return sandbox.ComputeInfo{}, err
	}
}

// computeInfo is the observation of c from its inspected container.
func computeInfo(c sandbox.Compute, ct container.InspectResponse) sandbox.ComputeInfo {
	c.ID = ct.ID
	state := sandbox.ComputeStopped
	if ct.State != nil {
		switch ct.State.Status {
		case container.StateRunning, container.StateRestarting:
			state = sandbox.ComputeRunning
		case container.StatePaused:
			state = sandbox.ComputePaused
		}
	}
	return sandbox.ComputeInfo{Compute: c, State: state}
}

// GetCompute observes incarnation c without changing it. A free name (or
// one held by another incarnation) is State absent: an observation, not a
// receipt. c's tombstone is the receipt (AbsenceReceipt).
func (p *Provider) GetCompute(ctx context.Context, c sandbox.Compute) (sandbox.ComputeInfo, error) {
	if err := p.ops.Check(sandbox.OpGetCompute); err != nil {
		return sandbox.ComputeInfo{}, err
	}
	if err := p.checkCompute(c); err != nil {
		return sandbox.ComputeInfo{}, err
	}
	info, err := p.observeCompute(ctx, c)
	if err != nil {
		return sandbox.ComputeInfo{}, fmt.Errorf("get compute: %w", err)
	}
	return info, nil
}

// ResumeCompute thaws incarnation c after an aborted suspend: a paused
// container is unpaused, a running one is left as it is, and a stopped
// one is refused with ErrRuntimeNotRunning (never cold-started).
func (p *Provider) ResumeCompute(ctx context.Context, c sandbox.Compute) (sandbox.ComputeInfo, error) {
	if err := p.ops.Check(sandbox.OpResumeCompute); err != nil {
		return sandbox.ComputeInfo{}, err
	}
	if err := p.checkCompute(c); err != nil {
		return sandbox.ComputeInfo{}, err
	}
	ct, err := p.inspectCompute(ctx, c)
	if err != nil {
		return sandbox.ComputeInfo{}, fmt.Errorf("resume compute: %w", err)
	}
	switch computeInfo(c, ct).State {
	case sandbox.ComputeRunning:
		return computeInfo(c, ct), nil
	case sandbox.ComputePaused:
	default:
		return sandbox.ComputeInfo{}, fmt.Errorf("resume compute: a stopped incarnation is never started again: %w", errdefs.ErrRuntimeNotRunning)
	}
	if _, err := p.cli.ContainerUnpause(ctx, ct.ID, client.ContainerUnpauseOptions{}); err != nil {
		return sandbox.ComputeInfo{}, fmt.Errorf("resume compute: unpause: %w", errdefs.ErrComputeUnconfirmed)
	}
	after, err := p.inspectCompute(ctx, sandbox.Compute{Reference: c.Reference, Generation: c.Generation, Name: c.Name, ID: ct.ID})
	if err != nil {
		return sandbox.ComputeInfo{}, fmt.Errorf("resume compute: confirm: %w", errdefs.ErrComputeUnconfirmed)
	}
	return computeInfo(c, after), nil
}

// RunCommandCompute runs cmd in incarnation c, which must be running, as
// RunCommand does.
func (p *Provider) RunCommandCompute(ctx context.Context, c sandbox.Compute, cmd sandbox.Command) (sandbox.CommandResult, error) {
	if err := p.ops.Check(sandbox.OpRunCommandCompute); err != nil {
		return sandbox.CommandResult{}, err
	}
	if err := p.checkCompute(c); err != nil {
		return sandbox.CommandResult{}, err
	}
	if err := cmd.Validate(); err != nil {
		return sandbox.CommandResult{}, err
	}
	ct, err := p.inspectCompute(ctx, c)
	if err != nil {
		return sandbox.CommandResult{}, fmt.Errorf("run command: %w", err)
	}
	if ct.State == nil || ct.State.Status != container.StateRunning {
		return sandbox.CommandResult{}, fmt.Errorf("run command: %w", errdefs.ErrRuntimeNotRunning)
	}
	return p.exec(ctx, ct.ID, cmd)
}

// KillCompute removes incarnation c: its container (by the inspected id)
// and its two volumes, after checking the ownership of all three, then
// confirms them absent. When another incarnation holds c's name, c is
// gone and nothing is touched. A foreign resource stops it before any
// change (ErrOwnership).
func (p *Provider) KillCompute(ctx context.Context, c sandbox.Compute) error {
	if err := p.ops.Check(sandbox.OpKillCompute); err != nil {
		return err
	}
	if err := p.checkCompute(c); err != nil {
		return err
	}
	ct, err := p.inspectCompute(ctx, c)
	switch {
	case errors.Is(err, errOtherIncarnation):
		return nil
	case errdefs.IsNotFound(err):
		ct = container.InspectResponse{}
	case errdefs.IsOwnership(err):
		// c's own tombstone: the name is claimed, nothing more to do.
		if claimed, terr := p.computeTombstone(ctx, c); terr != nil || !claimed {
			return fmt.Errorf("kill compute: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("kill compute: %w", err)
	}
	if err := p.removeGroup(ctx, c.Reference, c.Name, "kill compute", ct.ID); err != nil {
		return err
	}
	if ct.ID != "" || c.ID != "" || c.Generation < 2 {
		return nil
	}
	// A restore target whose instance Core never learned, and nothing holds
	// its name: a restore attempt may still make it. Claim the name (the
	// incarnation's absence receipt), as Kill does for a Create.
	if err := p.placeTombstoneAt(ctx, c.Reference, c.Name, p.computeLabels(c.Reference, c.Generation)); err != nil {
		return fmt.Errorf("kill compute: %w", err)
	}
	if claimed, err := p.computeTombstone(ctx, c); err != nil || !claimed {
		return fmt.Errorf("kill compute: confirm tombstone: %w", errdefs.ErrComputeUnconfirmed)
	}
	return p.confirmClaimedVolumes(ctx, c.Reference, c.Name, "kill compute")
}

// removeGroup removes the containers ids (checked by the caller) and
// group's two volumes after checking that every volume present is ref's,
// then confirms the containers and both volumes absent and forgets
// group's intent record. A foreign volume stops it before any change.
func (p *Provider) removeGroup(ctx context.Context, ref sandbox.Reference, group, op string, ids ...string) error {
	volumes := []string{group + homeSuffix, group + environmentSuffix}
	var present []string
	for _, name := range volumes {
		switch owned, err := p.volumeOwned(ctx, ref, name); {
		case err != nil && errdefs.IsNotFound(err):
		case err != nil && errdefs.IsOwnership(err):
			return fmt.Errorf("%s: %w", op, errdefs.ErrOwnership)
		case err != nil:
			return fmt.Errorf("%s: inspect volume: %w", op, errdefs.ErrComputeUnconfirmed)
		case owned:
			present = append(present, name)
		}
	}
	for _, id := range ids {
		if id == "" {
			continue
		}
		if _, err := p.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil && classify(err) != outcomeNotFound {
			return fmt.Errorf("%s: remove container: %w", op, errdefs.ErrComputeUnconfirmed)
		}
		if _, err := p.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); err == nil || classify(err) != outcomeNotFound {
			return fmt.Errorf("%s: confirm container absence: %w", op, errdefs.ErrComputeUnconfirmed)
		}
	}
	for _, name := range present {
		if _, err := p.cli.VolumeRemove(ctx, name, client.VolumeRemoveOptions{}); err != nil && classify(err) != outcomeNotFound {
			return fmt.Errorf("%s: remove volume: %w", op, errdefs.ErrComputeUnconfirmed)
		}
	}
	for _, name := range volumes {
		if _, err := p.cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{}); err == nil || classify(err) != outcomeNotFound {
			return fmt.Errorf("%s: confirm volume absence: %w", op, errdefs.ErrComputeUnconfirmed)
		}
	}
	p.forget(group)
	return nil
}

// snapshotLabels are the labels of a snapshot's resources.
func (p *Provider) snapshotLabels(ref sandbox.Reference, operationID, role string) map[string]string {
	labels := p.Labels(ref)
	labels[LabelSnapshotOperation] = operationID
	if role != "" {
		labels[LabelSnapshotRole] = role
	}
	return labels
}

// snapshotContainer creates a never-started container named name that
// mounts group's two volumes (the engine creates them, labelled, when they
// do not exist: the group is recorded first). Capture and holder
// containers are such; the holder pins the snapshot's volumes, which the
// engine refuses to remove while a container uses them.
func (p *Provider) snapshotContainer(ctx context.Context, ref sandbox.Reference, name, group string, labels, volumeLabels map[string]string) (string, error) {
	if err := p.record(ref, group); err != nil {
		return "", err
	}
	volume := func(source, target string) mount.Mount {
		return mount.Mount{Type: mount.TypeVolume, Source: source, Target: target, VolumeOptions: &mount.VolumeOptions{Labels: volumeLabels}}
	}
	res, err := p.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image: p.opts.Config.Image, User: RuntimeUser, Entrypoint: []string{snapshotEntrypoint}, Cmd: []string{},
			Labels: labels, NetworkDisabled: true,
		},
		HostConfig: &container.HostConfig{
			NetworkMode: container.NetworkMode("none"), CapDrop: []string{"ALL"},
			SecurityOpt: []string{"no-new-privileges:true"},
			Mounts: []mount.Mount{
				volume(group+homeSuffix, HomeMount),
				volume(group+environmentSuffix, EnvironmentPath),
			},
		},
	})
	if err != nil {
		return "", createErr("create snapshot container", err)
	}
	return res.ID, nil
}

// copyVolumes copies the contents of /home and /environment of container
// from into container to (archives through the engine: contents, modes,
// ownership, times, links), feeding every archive byte, in that order, to
// digest when it is not nil.
func (p *Provider) copyVolumes(ctx context.Context, from, to string, digest hash.Hash) error {
	for _, dir := range []string{HomeMount, EnvironmentPath} {
		src, err := p.cli.CopyFromContainer(ctx, from, client.CopyFromContainerOptions{SourcePath: dir + "/."})
		if err != nil {
			return fmt.Errorf("read %s: %w", dir, errdefs.ErrComputeUnconfirmed)
		}
		var r io.Reader = src.Content
		if digest != nil {
			r = io.TeeReader(src.Content, digest)
		}
		_, err = p.cli.CopyToContainer(ctx, to, client.CopyToContainerOptions{DestinationPath: dir, Content: r})
		_ = src.Content.Close()
		if err != nil {
			return fmt.Errorf("write %s: %w", dir, errdefs.ErrComputeUnconfirmed)
		}
	}
	return nil
}

// holder reads the snapshot named name of ref: its holder container with
// ref's ownership labels and the holder role. ErrNotFound, ErrOwnership or
// ErrObservationUnavailable.
func (p *Provider) holder(ctx context.Context, ref sandbox.Reference, name string) (container.InspectResponse, error) {
	h, err := p.inspectContainer(ctx, name)
	if err != nil {
		return container.InspectResponse{}, err
	}
	labels := labelsOf(h)
	if !p.owns(ref, labels) || labels[LabelSnapshotRole] != roleHolder || labels[LabelSnapshotOperation] == "" {
		return container.InspectResponse{}, errdefs.ErrOwnership
	}
	return h, nil
}

// snapshotIdentity is the identity of the snapshot whose holder is h. A
// Suspend's Provenance carries the digest of the copied archives; a
// Capture's names its copy method instead (LabelSnapshotCopy), since its
// helper's copy gives no digest. Both are read back from the holder, so
// Resume's identity check holds for either.
func snapshotIdentity(name string, h container.InspectResponse) sandbox.SnapshotIdentity {
	labels := labelsOf(h)
	if method := labels[LabelSnapshotCopy]; method != "" {
		return sandbox.SnapshotIdentity{
			ID:         name,
			Provenance: "docker-volumes;source-generation=" + labels[LabelSnapshotSource] + ";copy=" + method,
		}
	}
	return sandbox.SnapshotIdentity{
		ID:         name,
		Provenance: "docker-volumes;source-generation=" + labels[LabelSnapshotSource] + ";digest=" + labels[LabelSnapshotDigest],
	}
}

// Suspend captures incarnation req.Compute into the snapshot of
// req.OperationID: it pauses the source (the freezer), copies its two
// volumes into the snapshot's volumes through a never-started capture
// container, records completion by creating the snapshot's holder (whose
// labels carry the digest of the copied archives), removes the capture
// container, then removes the source container and its volumes. The
// snapshot's identity is returned, and the source as absent.
//
// A source that is not running or paused is refused before any mutation
// (ErrRuntimeNotRunning). A snapshot of req.OperationID that is complete
// is returned as it is, and the remaining removal of the source finished
// (unless the source runs again: a rollback raced the capture, and the
// snapshot is returned with the source running, nothing removed): the
// operation captures once. One whose capture container exists without a holder is
// an attempt of unknown outcome: Suspend refuses it with
// ErrComputeUnconfirmed and never copies again. With ObserveOnly it only
// reads: the complete snapshot with the source's current state, or
// ErrNotFound when the operation has no complete snapshot (its capture
// container without a holder, or nothing at all): the definite answer
// that no holder exists, distinct from a read that failed
// (ErrObservationUnavailable), which answers nothing.
func (p *Provider) Suspend(ctx context.Context, req sandbox.SuspendRequest) (sandbox.SuspendResult, error) {
	c := req.Compute
	if err := p.checkOperation(sandbox.OpSuspend, c, req.OperationID); err != nil {
		return sandbox.SuspendResult{}, err
	}
	ref, name := c.Reference, p.SnapshotName(c.Reference, req.OperationID)

	// A previous attempt of the operation.
	h, err := p.holder(ctx, ref, name)
	switch {
	case err == nil:
		if got := labelsOf(h)[LabelSnapshotOperation]; got != req.OperationID {
			return sandbox.SuspendResult{}, fmt.Errorf("suspend: %w", errdefs.ErrOwnership)
		}
		return p.finishSuspend(ctx, req, name, h)
	case !errdefs.IsNotFound(err):
		return sandbox.SuspendResult{}, fmt.Errorf("suspend: %w", err)
	}
	switch capture, err := p.inspectContainer(ctx, name+captureSuffix); {
	case err == nil && !p.owns(ref, labelsOf(capture)):
		return sandbox.SuspendResult{}, fmt.Errorf("suspend: capture container: %w", errdefs.ErrOwnership)
	case err == nil && req.ObserveOnly:
		// Read, not guessed: the operation has no holder, so no complete
		// snapshot (the answer on which Core thaws the source).
		return sandbox.SuspendResult{}, fmt.Errorf("suspend: the operation's capture did not complete: %w", errdefs.ErrNotFound)
	case err == nil:
		return sandbox.SuspendResult{}, fmt.Errorf("suspend: an earlier capture of the operation did not complete: %w", errdefs.ErrComputeUnconfirmed)
	case !errdefs.IsNotFound(err):
		return sandbox.SuspendResult{}, fmt.Errorf("suspend: %w", err)
	}
	src, err := p.inspectCompute(ctx, c)
	if err != nil {
		return sandbox.SuspendResult{}, fmt.Errorf("suspend: source: %w", err)
	}
	if req.ObserveOnly {
		return sandbox.SuspendResult{Source: computeInfo(c, src)}, fmt.Errorf("suspend: the operation made no snapshot: %w", errdefs.ErrNotFound)
	}
	// Snapshot names must be free: a foreign volume under one is never
	// touched, and a volume of ours there belongs to an attempt that left
	// no container (it is refused like an incomplete one).
	for _, v := range []string{name + homeSuffix, name + environmentSuffix} {
		switch owned, err := p.volumeOwned(ctx, ref, v); {
		case err == nil && owned:
			return sandbox.SuspendResult{}, fmt.Errorf("suspend: an earlier capture of the operation did not complete: %w", errdefs.ErrComputeUnconfirmed)
		case err != nil && errdefs.IsOwnership(err):
			return sandbox.SuspendResult{}, fmt.Errorf("suspend: snapshot volume: %w", errdefs.ErrOwnership)
		case err != nil && !errdefs.IsNotFound(err):
			return sandbox.SuspendResult{}, fmt.Errorf("suspend: snapshot volume: %w", errdefs.ErrObservationUnavailable)
		}
	}
	switch computeInfo(c, src).State {
	case sandbox.ComputeRunning:
		if _, err := p.cli.ContainerPause(ctx, src.ID, client.ContainerPauseOptions{}); err != nil {
			return sandbox.SuspendResult{}, fmt.Errorf("suspend: pause: %w", errdefs.ErrComputeUnconfirmed)
		}
	case sandbox.ComputePaused:
	default:
		return sandbox.SuspendResult{}, fmt.Errorf("suspend: the source is not running: %w", errdefs.ErrRuntimeNotRunning)
	}

	snapLabels := p.snapshotLabels(ref, req.OperationID, "")
	captureID, err := p.snapshotContainer(ctx, ref, name+captureSuffix, name, p.snapshotLabels(ref, req.OperationID, roleCapture), snapLabels)
	if err != nil {
		return sandbox.SuspendResult{}, fmt.Errorf("suspend: %w", err)
	}
	digest := sha256.New()
	if err := p.copyVolumes(ctx, src.ID, captureID, digest); err != nil {
		return sandbox.SuspendResult{}, fmt.Errorf("suspend: capture: %w", err)
	}
	holderLabels := p.snapshotLabels(ref, req.OperationID, roleHolder)
	holderLabels[LabelSnapshotDigest] = "sha256:" + hex.EncodeToString(digest.Sum(nil))
	holderLabels[LabelSnapshotSource] = strconv.FormatUint(c.Generation, 10)
	if _, err := p.snapshotContainer(ctx, ref, name, name, holderLabels, snapLabels); err != nil {
		return sandbox.SuspendResult{}, fmt.Errorf("suspend: record the snapshot: %w", err)
	}
	if h, err = p.holder(ctx, ref, name); err != nil {
		return sandbox.SuspendResult{}, fmt.Errorf("suspend: confirm the snapshot: %w", errdefs.ErrComputeUnconfirmed)
	}
	return p.finishSuspend(ctx, req, name, h)
}

// finishSuspend completes the operation whose snapshot (holder h) is
// complete: the capture container and the source incarnation go (the
// latter only when it is the exact paused or stopped source; ObserveOnly
// changes nothing).
func (p *Provider) finishSuspend(ctx context.Context, req sandbox.SuspendRequest, name string, h container.InspectResponse) (sandbox.SuspendResult, error) {
	c := req.Compute
	result := sandbox.SuspendResult{Snapshot: snapshotIdentity(name, h), Source: sandbox.ComputeInfo{Compute: c, State: sandbox.ComputeAbsent}}
	src, err := p.inspectCompute(ctx, c)
	switch {
	case errdefs.IsNotFound(err):
		src = container.InspectResponse{}
	case err != nil:
		return sandbox.SuspendResult{}, fmt.Errorf("suspend: source: %w", err)
	}
	if req.ObserveOnly {
		if src.ID != "" {
			result.Source = computeInfo(c, src)
		}
		return result, nil
	}
	if err := p.removeCapture(ctx, c.Reference, name, req.OperationID); err != nil {
		return sandbox.SuspendResult{}, fmt.Errorf("suspend: %w", err)
	}
	if src.ID != "" && computeInfo(c, src).State == sandbox.ComputeRunning {
		// Running again after the capture (a rollback by ResumeCompute
		// raced it): the snapshot is complete and returned with the source
		// running; nothing is removed, and the caller decides which goes.
		result.Source = computeInfo(c, src)
		return result, nil
	}
	if err := p.removeGroup(ctx, c.Reference, c.Name, "suspend: remove the source", src.ID); err != nil {
		return sandbox.SuspendResult{}, err
	}
	return result, nil
}

// removeCapture removes the capture container of snapshot name, when
// present and owned by the operation.
func (p *Provider) removeCapture(ctx context.Context, ref sandbox.Reference, name, operationID string) error {
	capture, err := p.inspectContainer(ctx, name+captureSuffix)
	switch {
	case errdefs.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("inspect the capture container: %w", errdefs.ErrComputeUnconfirmed)
	}
	labels := labelsOf(capture)
	if !p.owns(ref, labels) || labels[LabelSnapshotRole] != roleCapture || labels[LabelSnapshotOperation] != operationID {
		return fmt.Errorf("capture container: %w", errdefs.ErrOwnership)
	}
	if _, err := p.cli.ContainerRemove(ctx, capture.ID, client.ContainerRemoveOptions{Force: true}); err != nil && classify(err) != outcomeNotFound {
		return fmt.Errorf("remove the capture container: %w", errdefs.ErrComputeUnconfirmed)
	}
	return nil
}

// Resume restores snapshot req.Snapshot into the new incarnation
// req.Target: it checks the snapshot's holder and identity, refuses an
// existing target, creates the target's volumes and container with the
// fixed settings, copies the snapshot's volumes in, writes the fresh
// bootstrap file over the captured one and starts the Runtime. It returns
// settlement evidence like Create: the running incarnation with its id.
// The snapshot stays (DeleteSnapshot removes it). With ObserveOnly it
// only reads the target: running or in another state, or ErrNotFound.
func (p *Provider) Resume(ctx context.Context, req sandbox.ResumeRequest) (sandbox.ResumeResult, error) {
	t := req.Target
	if err := p.checkOperation(sandbox.OpResume, t, req.OperationID); err != nil {
		return sandbox.ResumeResult{}, err
	}
	ref := t.Reference
	if req.ObserveOnly {
		info, err := p.observeCompute(ctx, t)
		switch {
		case err != nil:
			return sandbox.ResumeResult{}, fmt.Errorf("resume: %w", err)
		case info.State == sandbox.ComputeAbsent && !info.AbsenceReceipt:
			return sandbox.ResumeResult{}, fmt.Errorf("resume: %w", errdefs.ErrNotFound)
		}
		return sandbox.ResumeResult{Compute: info}, nil
	}
	if err := req.Resources.Validate(); err != nil {
		return sandbox.ResumeResult{}, err
	}
	bootstrap, err := runtimebootstrap.Encode(req.Bootstrap)
	if err != nil {
		return sandbox.ResumeResult{}, errdefs.Invalid("bootstrap", "invalid runtime bootstrap file")
	}
	if runtimebootstrap.ValidateCA(req.CoreCA) != nil {
		return sandbox.ResumeResult{}, errdefs.Invalid("core_ca_pem", "must be empty or PEM CA certificates")
	}
	if !strings.HasPrefix(req.Snapshot.ID, p.Name(ref)+"-s") {
		return sandbox.ResumeResult{}, errdefs.Invalid("snapshot.id", "is not a snapshot of the allocation")
	}
	h, err := p.holder(ctx, ref, req.Snapshot.ID)
	if err != nil {
		return sandbox.ResumeResult{}, fmt.Errorf("resume: snapshot: %w", err)
	}
	if snapshotIdentity(req.Snapshot.ID, h) != req.Snapshot {
		return sandbox.ResumeResult{}, errdefs.Invalid("snapshot.provenance", "does not match the snapshot")
	}
	// Registered before the first look at the target, like Create's: no
	// tombstone is placed on the target's name while this runs.
	defer p.startCreateNamed(t.Name)()
	if err := p.refuseExistingCompute(ctx, t); err != nil {
		return sandbox.ResumeResult{}, err
	}
	if _, err := p.createVolumes(ctx, ref, t.Name, p.computeLabels(ref, t.Generation)); err != nil {
		return sandbox.ResumeResult{}, fmt.Errorf("resume: %w", err)
	}
	created, err := p.cli.ContainerCreate(ctx, p.computeCreateOptions(t, req.Resources))
	if err != nil {
		return sandbox.ResumeResult{}, fmt.Errorf("resume: %w", createErr("create container", err))
	}
	inspected, err := p.cli.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{})
	if err != nil {
		return sandbox.ResumeResult{}, fmt.Errorf("resume: inspect created container: %w", errdefs.ErrComputeUnconfirmed)
	}
	if !p.applied(inspected.Container, req.Resources) {
		return sandbox.ResumeResult{}, fmt.Errorf("resume: engine did not apply the configured limits or image: %w", errdefs.ErrInvalid)
	}
	if err := p.copyVolumes(ctx, h.ID, created.ID, nil); err != nil {
		return sandbox.ResumeResult{}, fmt.Errorf("resume: restore: %w", err)
	}
	archive, err := homeArchive(bootstrap, req.CoreCA)
	if err != nil {
		return sandbox.ResumeResult{}, fmt.Errorf("resume: build archive: %w", errdefs.ErrComputeUnconfirmed)
	}
	if _, err := p.cli.CopyToContainer(ctx, created.ID, client.CopyToContainerOptions{DestinationPath: HomeMount, Content: bytes.NewReader(archive)}); err != nil {
		return sandbox.ResumeResult{}, fmt.Errorf("resume: %w", createErr("copy bootstrap file", err))
	}
	if _, err := p.cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return sandbox.ResumeResult{}, fmt.Errorf("resume: %w", createErr("start runtime", err))
	}
	t.ID = created.ID
	return sandbox.ResumeResult{Compute: sandbox.ComputeInfo{Compute: t, State: sandbox.ComputeRunning}}, nil
}

// refuseExistingCompute checks that neither t's container nor one of its
// volumes exists: an existing one is ErrExists when owned, ErrOwnership
// when not.
func (p *Provider) refuseExistingCompute(ctx context.Context, t sandbox.Compute) error {
	ct, err := p.inspectContainer(ctx, t.Name)
	switch {
	case err == nil && p.owns(t.Reference, labelsOf(ct)):
		return fmt.Errorf("resume: %w", errdefs.ErrExists)
	case err == nil:
		return fmt.Errorf("resume: %w", errdefs.ErrOwnership)
	case !errdefs.IsNotFound(err):
		return fmt.Errorf("resume: check target: %w", err)
	}
	for _, name := range []string{t.Name + homeSuffix, t.Name + environmentSuffix} {
		switch owned, err := p.volumeOwned(ctx, t.Reference, name); {
		case err == nil && owned:
			return fmt.Errorf("resume: %w", errdefs.ErrExists)
		case err != nil && errdefs.IsOwnership(err):
			return fmt.Errorf("resume: %w", errdefs.ErrOwnership)
		case err != nil && !errdefs.IsNotFound(err):
			return fmt.Errorf("resume: check target volumes: %w", errdefs.ErrObservationUnavailable)
		}
	}
	return nil
}

// DeleteSnapshot removes exactly snapshot s of ref: its holder, a capture
// container or a Capture's copier left by an incomplete attempt, and its
// two volumes, after
// checking the ownership of each, then confirms them absent. A snapshot
// already gone succeeds; a foreign resource under one of its names stops
// it before any change (ErrOwnership).
func (p *Provider) DeleteSnapshot(ctx context.Context, ref sandbox.Reference, s sandbox.SnapshotIdentity) error {
	if err := p.ops.Check(sandbox.OpDeleteSnapshot); err != nil {
		return err
	}
	if err := ref.Validate(); err != nil {
		return err
	}
	if !strings.HasPrefix(s.ID, p.Name(ref)+"-s") || strings.ContainsAny(s.ID, "/") {
		return errdefs.Invalid("snapshot.id", "is not a snapshot of the allocation")
	}
	var ids []string
	operation := ""
	for _, name := range []string{s.ID, s.ID + captureSuffix, s.ID + copierSuffix} {
		ct, err := p.inspectContainer(ctx, name)
		switch {
		case errdefs.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("delete snapshot: %w", err)
		}
		labels := labelsOf(ct)
		if !p.owns(ref, labels) || labels[LabelSnapshotRole] == "" || labels[LabelSnapshotOperation] == "" ||
			(operation != "" && labels[LabelSnapshotOperation] != operation) {
			return fmt.Errorf("delete snapshot: %w", errdefs.ErrOwnership)
		}
		operation = labels[LabelSnapshotOperation]
		if p.SnapshotName(ref, operation) != s.ID {
			return fmt.Errorf("delete snapshot: %w", errdefs.ErrOwnership)
		}
		ids = append(ids, ct.ID)
	}
	return p.removeGroup(ctx, ref, s.ID, "delete snapshot", ids...)
}
