package docker

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/moby/moby/client"

	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// A fork's child is seeded by a helper container, like Capture's copy
// (capture.go): K0 measured a helper's cp -a at 188 ms for 100 MB against
// 306 ms through the engine's archive endpoints.

const (
	// roleSeeder is the LabelSnapshotRole of the helper container that
	// copies a snapshot into a seeded Create's volumes. It carries the
	// child's ownership labels (never the snapshot owner's), so the
	// child's Kill removes it, first of all (it mounts the child's
	// volumes), and the owner's cleanup never sees it.
	roleSeeder = "seeder"
	// seederSuffix names a child's seeder container.
	seederSuffix = "-seeder"
)

// seedSource is a checked snapshot a seeded Create copies: its owner and
// the names of its two volumes.
type seedSource struct {
	owner     sandbox.Reference
	name      string
	operation string
}

// CreateSeeded is Create whose volumes start as copies of snapshot
// req.Snapshot of req.Owner (a fork's child). Before any mutation it
// checks the snapshot: its holder must be owned by req.Owner and match
// the identity exactly (a snapshot that is gone or foreign refuses the
// Create with the absence receipt: nothing was asked of the engine). Then
// it is Create: the child's volumes and container, and instead of the
// environment archive a seeder container (the runtime image as root with
// CHOWN, FOWNER and DAC_OVERRIDE only, no network) runs busybox cp -a from
// the snapshot's volumes, mounted read-only, into the child's, and removes
// from the copied home what belongs to the source's Runtime
// (runtimebootstrap.SourceStateFiles: its bootstrap, CA, park marker and
// wake file). The seeder goes, the child's own bootstrap is written and
// the Runtime starts. The snapshot stays. Every failure after the first
// mutation is Create's: the Reference is returned and Kill removes what
// the attempt made, the seeder included.
func (p *Provider) CreateSeeded(ctx context.Context, req sandbox.SeededCreateRequest) (sandbox.Info, error) {
	if err := p.ops.Check(sandbox.OpCreateSeeded); err != nil {
		return sandbox.Info{}, err
	}
	if err := req.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	owner := req.Owner
	if !strings.HasPrefix(req.Snapshot.ID, p.Name(owner)+"-s") || strings.ContainsAny(req.Snapshot.ID, "/") {
		return sandbox.Info{}, errdefs.Invalid("snapshot.id", "is not a snapshot of the owner")
	}
	absent := sandbox.Info{Reference: req.Create.Reference, State: sandbox.StateAbsent, CreateSettled: true}
	h, err := p.holder(ctx, owner, req.Snapshot.ID)
	switch {
	case errdefs.IsNotFound(err) || errdefs.IsOwnership(err):
		return absent, fmt.Errorf("create seeded: snapshot: %w", err)
	case err != nil:
		return sandbox.Info{}, fmt.Errorf("create seeded: snapshot: %w", errdefs.ErrObservationUnavailable)
	}
	if snapshotIdentity(req.Snapshot.ID, h) != req.Snapshot {
		return absent, fmt.Errorf("create seeded: %w", errdefs.Invalid("snapshot.provenance", "does not match the snapshot"))
	}
	seed := seedSource{owner: owner, name: req.Snapshot.ID, operation: labelsOf(h)[LabelSnapshotOperation]}
	return p.create(ctx, req.Create, &seed)
}

// seederScript copies the seed's volumes into the child's and removes the
// source Runtime's own files from the copied home. It first checks that
// the seed's environment volume holds a workspace: a snapshot deleted
// since CreateSeeded checked its holder leaves names the engine would
// create empty for the mount, and such a copy must fail, never seed an
// empty child.
func seederScript() string {
	var rm []string
	for _, f := range runtimebootstrap.SourceStateFiles() {
		rel, ok := strings.CutPrefix(f, HomeMount+"/")
		if !ok {
			panic("docker: a Runtime state file outside " + HomeMount + ": " + f)
		}
		rm = append(rm, path.Join("/dst/home", rel))
	}
	return "test -d /src/environment/" + WorkspaceSubpath +
		" && cp -a /src/home/. /dst/home/ && cp -a /src/environment/. /dst/environment/ && rm -f " + strings.Join(rm, " ")
}

// copySeed runs the seeder of ref's first incarnation: created, started,
// waited for, removed. Any failure is ErrComputeUnconfirmed with the
// seeder left for Kill.
func (p *Provider) copySeed(ctx context.Context, ref sandbox.Reference, seed seedSource) error {
	group := p.Name(ref)
	// A seed volume the engine would have to create is labelled as the
	// owner's snapshot, so the owner's cleanup finds it.
	seedLabels, childLabels := p.snapshotLabels(seed.owner, seed.operation, ""), p.computeLabels(ref, 1)
	labels := p.Labels(ref)
	labels[LabelSnapshotRole] = roleSeeder
	id, err := p.helperContainer(ctx, group+seederSuffix, labels, seederScript(),
		helperMount(seed.name+homeSuffix, "/src/home", true, seedLabels),
		helperMount(seed.name+environmentSuffix, "/src/environment", true, seedLabels),
		helperMount(group+homeSuffix, "/dst/home", false, childLabels),
		helperMount(group+environmentSuffix, "/dst/environment", false, childLabels))
	if err != nil {
		return createErr("create the seeder", err)
	}
	if err := p.runCopier(ctx, id); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	if _, err := p.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil && classify(err) != outcomeNotFound {
		return fmt.Errorf("remove the seeder: %w", errdefs.ErrComputeUnconfirmed)
	}
	return nil
}

// removeSeeder removes the seeder findOthers found (id; "" is none): a
// seeded Create cut short leaves it, and Kill removes it before the first
// incarnation's volumes, which it mounts.
func (p *Provider) removeSeeder(ctx context.Context, id string) error {
	if id == "" {
		return nil
	}
	if _, err := p.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil && classify(err) != outcomeNotFound {
		return fmt.Errorf("remove the seeder: %w", errdefs.ErrComputeUnconfirmed)
	}
	return nil
}
