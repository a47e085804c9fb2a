package docker

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// Capture (fork's copy of a Session that keeps running) copies by a helper
// container, not by the engine's archive endpoints like Suspend: K0
// measured 188 ms against 306 ms for 100 MB (docs/docker-adapter.md,
// "Copying a volume pair"), and the source is paused for the copy alone.

const (
	// roleCopier is the LabelSnapshotRole of the helper container that
	// copies a Capture's source volumes into its snapshot's volumes. It
	// carries the Reference's ownership labels, so Kill, DeleteSnapshot and
	// the leftovers checks find it like every other snapshot resource.
	roleCopier = "copier"
	// copierSuffix names a snapshot's copier container.
	copierSuffix = "-copier"
	// LabelSnapshotCopy (holder only) names how a snapshot was copied when
	// the copy gives no content digest: CopyHelperCP for Capture. A
	// Suspend's holder has no such label and carries LabelSnapshotDigest.
	LabelSnapshotCopy = "io.berth.snapshot-copy"
	// CopyHelperCP is LabelSnapshotCopy of a snapshot copied by a helper
	// container running busybox `cp -a` from the source volumes.
	CopyHelperCP = "helper-cp-a"
	// copierScript is the helper's command: an archive copy of both
	// volumes that keeps owners, modes, times and links.
	copierScript = "cp -a /src/home/. /dst/home/ && cp -a /src/environment/. /dst/environment/"
	// thawTimeout bounds the unpause of a source after a failed Capture,
	// whose caller's context may be the reason of the failure.
	thawTimeout = 30 * time.Second
)

// Capture copies incarnation req.Compute's two volumes into the snapshot of
// req.OperationID and keeps the source: the snapshot's names and labels
// are a Suspend's (SnapshotName), so Resume, DeleteSnapshot and Kill treat
// it alike. In order: the snapshot's capture container (which creates its
// volumes) and the copier are created, a running source is paused, the
// copier runs busybox `cp -a` from the source volumes (mounted read-only)
// into the snapshot's, the source is unpaused, the copier is removed, the
// holder records completion (LabelSnapshotCopy, no digest: the copy gives
// none) and the capture container goes. A paused or stopped source is
// copied as it is and left so.
//
// A complete snapshot of the operation is returned as it is (nothing
// copied again). A capture or copier container of the operation without a
// holder is an attempt of unknown outcome: Capture refuses it with
// ErrComputeUnconfirmed. A failed copy thaws the source and removes the
// copier, the capture container and the snapshot's volumes, then answers
// ErrComputeUnconfirmed; when that removal is confirmed, the operation has
// nothing left and ObserveOnly reads ErrNotFound. ObserveOnly only reads:
// the complete snapshot with the source's current state, ErrNotFound when
// the operation has no holder, another error when the read failed.
func (p *Provider) Capture(ctx context.Context, req sandbox.CaptureRequest) (sandbox.CaptureResult, error) {
	c := req.Compute
	if err := p.checkOperation(sandbox.OpCapture, c, req.OperationID); err != nil {
		return sandbox.CaptureResult{}, err
	}
	ref, name := c.Reference, p.SnapshotName(c.Reference, req.OperationID)

	// A previous attempt of the operation.
	h, err := p.holder(ctx, ref, name)
	switch {
	case err == nil:
		if labelsOf(h)[LabelSnapshotOperation] != req.OperationID {
			return sandbox.CaptureResult{}, fmt.Errorf("capture: %w", errdefs.ErrOwnership)
		}
		return p.finishCapture(ctx, req, name, h)
	case !errdefs.IsNotFound(err):
		return sandbox.CaptureResult{}, fmt.Errorf("capture: %w", err)
	}
	for _, helper := range []string{name + captureSuffix, name + copierSuffix} {
		switch ct, err := p.inspectContainer(ctx, helper); {
		case err == nil && !p.owns(ref, labelsOf(ct)):
			return sandbox.CaptureResult{}, fmt.Errorf("capture: snapshot container: %w", errdefs.ErrOwnership)
		case err == nil && req.ObserveOnly:
			return sandbox.CaptureResult{}, fmt.Errorf("capture: the operation's copy did not complete: %w", errdefs.ErrNotFound)
		case err == nil:
			return sandbox.CaptureResult{}, fmt.Errorf("capture: an earlier copy of the operation did not complete: %w", errdefs.ErrComputeUnconfirmed)
		case !errdefs.IsNotFound(err):
			return sandbox.CaptureResult{}, fmt.Errorf("capture: %w", err)
		}
	}
	src, err := p.inspectCompute(ctx, c)
	if err != nil {
		return sandbox.CaptureResult{}, fmt.Errorf("capture: source: %w", err)
	}
	if req.ObserveOnly {
		return sandbox.CaptureResult{Source: computeInfo(c, src)}, fmt.Errorf("capture: the operation made no snapshot: %w", errdefs.ErrNotFound)
	}
	if err := p.checkCaptureNames(ctx, c, name); err != nil {
		return sandbox.CaptureResult{}, err
	}
	state := computeInfo(c, src).State

	snapLabels := p.snapshotLabels(ref, req.OperationID, "")
	if _, err := p.snapshotContainer(ctx, ref, name+captureSuffix, name, p.snapshotLabels(ref, req.OperationID, roleCapture), snapLabels); err != nil {
		return sandbox.CaptureResult{}, fmt.Errorf("capture: %w", err)
	}
	copierID, err := p.createCopier(ctx, c, name, req.OperationID)
	if err != nil {
		return sandbox.CaptureResult{}, p.abortCapture(ctx, c, name, req.OperationID, "", false, fmt.Errorf("capture: %w", err))
	}
	paused := false
	if state == sandbox.ComputeRunning {
		paused = true // also when the answer is lost: the thaw is owed either way
		if _, err := p.cli.ContainerPause(ctx, src.ID, client.ContainerPauseOptions{}); err != nil {
			return sandbox.CaptureResult{}, p.abortCapture(ctx, c, name, req.OperationID, src.ID, paused, fmt.Errorf("capture: pause: %w", errdefs.ErrComputeUnconfirmed))
		}
	}
	if err := p.runCopier(ctx, copierID); err != nil {
		return sandbox.CaptureResult{}, p.abortCapture(ctx, c, name, req.OperationID, src.ID, paused, fmt.Errorf("capture: copy: %w", err))
	}
	if paused {
		if _, err := p.cli.ContainerUnpause(ctx, src.ID, client.ContainerUnpauseOptions{}); err != nil {
			return sandbox.CaptureResult{}, p.abortCapture(ctx, c, name, req.OperationID, src.ID, paused, fmt.Errorf("capture: unpause: %w", errdefs.ErrComputeUnconfirmed))
		}
		paused = false
	}
	if _, err := p.cli.ContainerRemove(ctx, copierID, client.ContainerRemoveOptions{Force: true}); err != nil && classify(err) != outcomeNotFound {
		return sandbox.CaptureResult{}, p.abortCapture(ctx, c, name, req.OperationID, src.ID, paused, fmt.Errorf("capture: remove the copier: %w", errdefs.ErrComputeUnconfirmed))
	}
	holderLabels := p.snapshotLabels(ref, req.OperationID, roleHolder)
	holderLabels[LabelSnapshotCopy] = CopyHelperCP
	holderLabels[LabelSnapshotSource] = strconv.FormatUint(c.Generation, 10)
	if _, err := p.snapshotContainer(ctx, ref, name, name, holderLabels, snapLabels); err != nil {
		// The holder's create may have happened: the copy stays for an
		// observation (the capture container marks the attempt).
		return sandbox.CaptureResult{}, fmt.Errorf("capture: record the snapshot: %w", err)
	}
	if h, err = p.holder(ctx, ref, name); err != nil {
		return sandbox.CaptureResult{}, fmt.Errorf("capture: confirm the snapshot: %w", errdefs.ErrComputeUnconfirmed)
	}
	return p.finishCapture(ctx, req, name, h)
}

// checkCaptureNames checks, before any mutation, that the snapshot's
// volume names are free (a foreign volume is never touched; one of ours
// belongs to an attempt that left no container and is refused like an
// incomplete one) and that the source's two volumes exist and are owned:
// the copier mounts them by name, and the engine would create a missing
// one empty.
func (p *Provider) checkCaptureNames(ctx context.Context, c sandbox.Compute, name string) error {
	ref := c.Reference
	for _, v := range []string{name + homeSuffix, name + environmentSuffix} {
		switch owned, err := p.volumeOwned(ctx, ref, v); {
		case err == nil && owned:
			return fmt.Errorf("capture: an earlier copy of the operation did not complete: %w", errdefs.ErrComputeUnconfirmed)
		case err != nil && errdefs.IsOwnership(err):
			return fmt.Errorf("capture: snapshot volume: %w", errdefs.ErrOwnership)
		case err != nil && !errdefs.IsNotFound(err):
			return fmt.Errorf("capture: snapshot volume: %w", errdefs.ErrObservationUnavailable)
		}
	}
	for _, v := range []string{c.Name + homeSuffix, c.Name + environmentSuffix} {
		switch _, err := p.volumeOwned(ctx, ref, v); {
		case err != nil && errdefs.IsNotFound(err):
			return fmt.Errorf("capture: the source has no volume %s: %w", v[len(c.Name):], errdefs.ErrRuntimeNotRunning)
		case err != nil && errdefs.IsOwnership(err):
			return fmt.Errorf("capture: source volume: %w", errdefs.ErrOwnership)
		case err != nil:
			return fmt.Errorf("capture: source volume: %w", errdefs.ErrObservationUnavailable)
		}
	}
	return nil
}

// createCopier creates (never starts) the copier of snapshot name: a
// helper (helperContainer) with the source's volumes read-only under /src
// and the snapshot's under /dst.
func (p *Provider) createCopier(ctx context.Context, c sandbox.Compute, name, operationID string) (string, error) {
	ref := c.Reference
	srcLabels, snapLabels := p.computeLabels(ref, c.Generation), p.snapshotLabels(ref, operationID, "")
	id, err := p.helperContainer(ctx, name+copierSuffix, p.snapshotLabels(ref, operationID, roleCopier), copierScript,
		helperMount(c.Name+homeSuffix, "/src/home", true, srcLabels),
		helperMount(c.Name+environmentSuffix, "/src/environment", true, srcLabels),
		helperMount(name+homeSuffix, "/dst/home", false, snapLabels),
		helperMount(name+environmentSuffix, "/dst/environment", false, snapLabels))
	if err != nil {
		return "", createErr("create the copier", err)
	}
	return id, nil
}

// helperContainer creates (never starts) a copying helper named name: the
// runtime image running script with busybox sh, as root with CHOWN,
// FOWNER and DAC_OVERRIDE only (to keep every owner and mode), no
// network, no-new-privileges, with mounts.
func (p *Provider) helperContainer(ctx context.Context, name string, labels map[string]string, script string, mounts ...mount.Mount) (string, error) {
	res, err := p.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image: p.opts.Config.Image, User: "0:0",
			Entrypoint: []string{"/bin/busybox", "sh", "-c", script}, Cmd: []string{},
			Labels: labels, NetworkDisabled: true,
		},
		HostConfig: &container.HostConfig{
			NetworkMode: container.NetworkMode("none"),
			CapDrop:     []string{"ALL"}, CapAdd: []string{"CHOWN", "FOWNER", "DAC_OVERRIDE"},
			SecurityOpt: []string{"no-new-privileges:true"},
			Mounts:      mounts,
		},
	})
	if err != nil {
		return "", err
	}
	return res.ID, nil
}

// helperMount mounts volume source at target (labels, should the engine
// have to create it), without copying the image's content into it.
func helperMount(source, target string, readOnly bool, labels map[string]string) mount.Mount {
	return mount.Mount{Type: mount.TypeVolume, Source: source, Target: target, ReadOnly: readOnly,
		VolumeOptions: &mount.VolumeOptions{NoCopy: true, Labels: labels}}
}

// runCopier starts the copier and waits for its exit; anything but exit
// status 0 is ErrComputeUnconfirmed.
func (p *Provider) runCopier(ctx context.Context, id string) error {
	if _, err := p.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("start the copier: %w", errdefs.ErrComputeUnconfirmed)
	}
	wait := p.cli.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case res := <-wait.Result:
		if res.StatusCode != 0 || res.Error != nil {
			return fmt.Errorf("the copier exited with status %d: %w", res.StatusCode, errdefs.ErrComputeUnconfirmed)
		}
		return nil
	case <-wait.Error:
		return fmt.Errorf("wait for the copier: %w", errdefs.ErrComputeUnconfirmed)
	}
}

// abortCapture is a failed Capture's cleanup, on a context of its own (the
// caller's may be why it failed): it unpauses the source when Capture
// paused it (sourceID, paused), removes the copier, the capture container
// and the snapshot's volumes, and returns cause (of class
// ErrComputeUnconfirmed: the caller observes before it decides anything).
// What it cannot remove stays for DeleteSnapshot or Kill, and marks the
// attempt for a repeated Capture.
func (p *Provider) abortCapture(ctx context.Context, c sandbox.Compute, name, operationID, sourceID string, paused bool, cause error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), thawTimeout)
	defer cancel()
	if paused && sourceID != "" {
		if _, err := p.cli.ContainerUnpause(ctx, sourceID, client.ContainerUnpauseOptions{}); err != nil {
			// A pause whose answer was lost may never have happened: the
			// engine refuses to unpause a running container. Only a source
			// read as not paused lets the cleanup go on.
			src, ierr := p.cli.ContainerInspect(ctx, sourceID, client.ContainerInspectOptions{})
			if ierr != nil || src.Container.State == nil || src.Container.State.Paused {
				return fmt.Errorf("%w (and the source's unpause failed)", cause)
			}
		}
	}
	var ids []string
	for _, helper := range []struct{ name, role string }{{name + copierSuffix, roleCopier}, {name + captureSuffix, roleCapture}} {
		ct, err := p.inspectContainer(ctx, helper.name)
		switch {
		case errdefs.IsNotFound(err):
			continue
		case err != nil:
			return cause
		}
		labels := labelsOf(ct)
		if !p.owns(c.Reference, labels) || labels[LabelSnapshotRole] != helper.role || labels[LabelSnapshotOperation] != operationID {
			return cause
		}
		ids = append(ids, ct.ID)
	}
	_ = p.removeGroup(ctx, c.Reference, name, "capture: remove the incomplete copy", ids...)
	return cause
}

// finishCapture completes the operation whose snapshot (holder h) is
// complete: the copier and the capture container go (ObserveOnly changes
// nothing), and the source is observed as it is now.
func (p *Provider) finishCapture(ctx context.Context, req sandbox.CaptureRequest, name string, h container.InspectResponse) (sandbox.CaptureResult, error) {
	c := req.Compute
	result := sandbox.CaptureResult{Snapshot: snapshotIdentity(name, h), Source: sandbox.ComputeInfo{Compute: c, State: sandbox.ComputeAbsent}}
	if !req.ObserveOnly {
		if err := p.removeSnapshotHelper(ctx, c.Reference, name+copierSuffix, roleCopier, req.OperationID); err != nil {
			return sandbox.CaptureResult{}, fmt.Errorf("capture: %w", err)
		}
		if err := p.removeCapture(ctx, c.Reference, name, req.OperationID); err != nil {
			return sandbox.CaptureResult{}, fmt.Errorf("capture: %w", err)
		}
	}
	src, err := p.inspectCompute(ctx, c)
	switch {
	case errdefs.IsNotFound(err):
	case err != nil:
		return sandbox.CaptureResult{}, fmt.Errorf("capture: source: %w", err)
	default:
		result.Source = computeInfo(c, src)
	}
	return result, nil
}

// removeSnapshotHelper removes the container named helper when present and
// owned by the operation in role.
func (p *Provider) removeSnapshotHelper(ctx context.Context, ref sandbox.Reference, helper, role, operationID string) error {
	ct, err := p.inspectContainer(ctx, helper)
	switch {
	case errdefs.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("inspect the %s container: %w", role, errdefs.ErrComputeUnconfirmed)
	}
	labels := labelsOf(ct)
	if !p.owns(ref, labels) || labels[LabelSnapshotRole] != role || labels[LabelSnapshotOperation] != operationID {
		return fmt.Errorf("%s container: %w", role, errdefs.ErrOwnership)
	}
	if _, err := p.cli.ContainerRemove(ctx, ct.ID, client.ContainerRemoveOptions{Force: true}); err != nil && classify(err) != outcomeNotFound {
		return fmt.Errorf("remove the %s container: %w", role, errdefs.ErrComputeUnconfirmed)
	}
	return nil
}
