package docker

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/moby/moby/client"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// A fork's seed moves a snapshot to another node as one tar stream: the
// snapshot's /home entries under "home/", then its /environment entries
// under "environment/", then a trailer entry (seedTrailer) that counts
// them, so a stream cut short at an entry boundary is refused rather than
// imported incomplete.

const (
	// seedTrailer is the export's last entry.
	seedTrailer = "berth-seed-trailer.json"
	// CopyImport is LabelSnapshotCopy of a snapshot ImportSnapshot made.
	CopyImport = "import"
	// maxTrailerBytes bounds the trailer's read.
	maxTrailerBytes = 4096
)

// trailer is the export's last entry: what came before it.
type trailer struct {
	Entries          int64  `json:"entries"`
	Bytes            int64  `json:"bytes"`
	SourceGeneration string `json:"source_generation"`
}

// seedParts are the two volumes of an export, in order: their mount in a
// snapshot container and their prefix in the stream.
var seedParts = []struct{ mount, prefix string }{{HomeMount, "home/"}, {EnvironmentPath, "environment/"}}

// ExportSnapshot writes snapshot s of owner to w (the format above),
// reading its holder's volumes through the engine's archive endpoint. The
// holder must be owner's and match s exactly; the snapshot stays.
func (p *Provider) ExportSnapshot(ctx context.Context, owner sandbox.Reference, s sandbox.SnapshotIdentity, w io.Writer) error {
	if err := p.ops.Check(sandbox.OpExportSnapshot); err != nil {
		return err
	}
	if err := owner.Validate(); err != nil {
		return err
	}
	if !strings.HasPrefix(s.ID, p.Name(owner)+"-s") || strings.ContainsAny(s.ID, "/") {
		return errdefs.Invalid("snapshot.id", "is not a snapshot of the owner")
	}
	h, err := p.holder(ctx, owner, s.ID)
	if err != nil {
		return fmt.Errorf("export snapshot: %w", err)
	}
	if snapshotIdentity(s.ID, h) != s {
		return errdefs.Invalid("snapshot.provenance", "does not match the snapshot")
	}
	tw := tar.NewWriter(w)
	var t trailer
	t.SourceGeneration = labelsOf(h)[LabelSnapshotSource]
	for _, part := range seedParts {
		res, err := p.cli.CopyFromContainer(ctx, h.ID, client.CopyFromContainerOptions{SourcePath: part.mount + "/."})
		if err != nil {
			return fmt.Errorf("export snapshot: read %s: %w", part.mount, errdefs.ErrObservationUnavailable)
		}
		err = copyPrefixed(tw, res.Content, part.prefix, &t)
		_ = res.Content.Close()
		if err != nil {
			return fmt.Errorf("export snapshot: %s: %w", part.mount, err)
		}
	}
	body, err := json.Marshal(t)
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: seedTrailer, Typeflag: tar.TypeReg, Mode: 0o600, Size: int64(len(body))}); err != nil {
		return fmt.Errorf("export snapshot: %w", err)
	}
	if _, err := tw.Write(body); err != nil {
		return fmt.Errorf("export snapshot: %w", err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("export snapshot: %w", err)
	}
	return nil
}

// copyPrefixed copies the engine's archive r of one volume into tw, each
// entry's name (and a hard link's target) under prefix, counting them.
func copyPrefixed(tw *tar.Writer, r io.Reader, prefix string, t *trailer) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return errdefs.ErrObservationUnavailable
		}
		h.Name = prefix + relative(h.Name)
		if h.Typeflag == tar.TypeLink {
			h.Linkname = prefix + relative(h.Linkname)
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		n, err := io.Copy(tw, tr)
		if err != nil {
			return err
		}
		t.Entries++
		t.Bytes += n
	}
}

// relative is an archive name without its leading "./" or "/"; the root
// itself is "".
func relative(name string) string {
	name = strings.TrimPrefix(path.Clean("/"+name), "/")
	return name
}

// ImportSnapshot makes a snapshot of req.Owner under req.OperationID from
// the stream r that ExportSnapshot wrote (sandbox.ImportRequest). Its name
// is a Suspend's (SnapshotName), its holder records the copy method
// (CopyImport) and the source's generation, so CreateSeeded, Resume,
// DeleteSnapshot and Kill treat it like any snapshot of the owner. A
// complete snapshot of the operation is returned as it is; an incomplete
// one (a capture container or volumes without a holder) is removed
// first. The stream goes into a capture container's volumes through the
// engine's archive endpoint, /home first, then /environment; an entry out
// of place, a missing or contradicting trailer, or a read error removes
// what the attempt made and refuses the import (ErrInvalid for the
// stream's faults, ErrComputeUnconfirmed when the removal failed too).
// Discard is DeleteSnapshot of the operation's snapshot name.
func (p *Provider) ImportSnapshot(ctx context.Context, req sandbox.ImportRequest, r io.Reader) (sandbox.SnapshotIdentity, error) {
	if err := p.ops.Check(sandbox.OpImportSnapshot); err != nil {
		return sandbox.SnapshotIdentity{}, err
	}
	if err := req.Validate(); err != nil {
		return sandbox.SnapshotIdentity{}, err
	}
	owner, op := req.Owner, req.OperationID
	name := p.SnapshotName(owner, op)
	if req.Discard {
		return sandbox.SnapshotIdentity{}, p.DeleteSnapshot(ctx, owner, sandbox.SnapshotIdentity{ID: name})
	}
	h, err := p.holder(ctx, owner, name)
	switch {
	case err == nil && labelsOf(h)[LabelSnapshotOperation] == op:
		return snapshotIdentity(name, h), nil
	case err == nil:
		return sandbox.SnapshotIdentity{}, fmt.Errorf("import snapshot: %w", errdefs.ErrOwnership)
	case !errdefs.IsNotFound(err):
		return sandbox.SnapshotIdentity{}, fmt.Errorf("import snapshot: %w", err)
	}
	// An earlier attempt of the operation that did not complete.
	if err := p.DeleteSnapshot(ctx, owner, sandbox.SnapshotIdentity{ID: name}); err != nil {
		return sandbox.SnapshotIdentity{}, fmt.Errorf("import snapshot: remove an incomplete attempt: %w", err)
	}
	snapLabels := p.snapshotLabels(owner, op, "")
	captureID, err := p.snapshotContainer(ctx, owner, name+captureSuffix, name, p.snapshotLabels(owner, op, roleCapture), snapLabels)
	if err != nil {
		return sandbox.SnapshotIdentity{}, p.abortImport(ctx, owner, name, fmt.Errorf("import snapshot: %w", err))
	}
	t, err := p.receive(ctx, captureID, r)
	if err != nil {
		return sandbox.SnapshotIdentity{}, p.abortImport(ctx, owner, name, fmt.Errorf("import snapshot: %w", err))
	}
	holderLabels := p.snapshotLabels(owner, op, roleHolder)
	holderLabels[LabelSnapshotCopy] = CopyImport
	holderLabels[LabelSnapshotSource] = t.SourceGeneration
	if _, err := p.snapshotContainer(ctx, owner, name, name, holderLabels, snapLabels); err != nil {
		return sandbox.SnapshotIdentity{}, fmt.Errorf("import snapshot: record the snapshot: %w", err)
	}
	if err := p.removeCapture(ctx, owner, name, op); err != nil {
		return sandbox.SnapshotIdentity{}, fmt.Errorf("import snapshot: %w", err)
	}
	if h, err = p.holder(ctx, owner, name); err != nil {
		return sandbox.SnapshotIdentity{}, fmt.Errorf("import snapshot: confirm the snapshot: %w", errdefs.ErrComputeUnconfirmed)
	}
	return snapshotIdentity(name, h), nil
}

// abortImport removes what an import attempt made, on a context of its
// own, and returns cause; ErrComputeUnconfirmed when the removal failed.
func (p *Provider) abortImport(ctx context.Context, owner sandbox.Reference, name string, cause error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), thawTimeout)
	defer cancel()
	if err := p.DeleteSnapshot(ctx, owner, sandbox.SnapshotIdentity{ID: name}); err != nil {
		return fmt.Errorf("%w (and its removal failed: %w)", cause, errdefs.ErrComputeUnconfirmed)
	}
	return cause
}

// receive splits the stream r into the capture container's two volumes,
// one archive put each, and returns the trailer once it matched what came
// before it.
func (p *Provider) receive(ctx context.Context, captureID string, r io.Reader) (trailer, error) {
	tr := tar.NewReader(r)
	rc := &receiver{p: p, ctx: ctx, id: captureID, part: -1}
	defer rc.abort()
	for {
		h, err := tr.Next()
		if err != nil {
			return trailer{}, errdefs.Invalid("archive", "ended before its trailer")
		}
		if h.Name == seedTrailer {
			if err := rc.finish(); err != nil {
				return trailer{}, err
			}
			return checkTrailer(tr, rc.got, rc.part)
		}
		if err := rc.entry(h, tr); err != nil {
			return trailer{}, err
		}
	}
}

// receiver is receive's state: the volume being written (part, an index
// of seedParts; -1 before the first) and its put, and what was imported.
type receiver struct {
	p    *Provider
	ctx  context.Context
	id   string
	part int
	put  *archivePut
	got  trailer
}

// entry writes one entry of the stream into its volume's put, starting
// the next volume's put when the entry is the first of it.
func (rc *receiver) entry(h *tar.Header, data io.Reader) error {
	next := -1
	for i, sp := range seedParts {
		if strings.HasPrefix(h.Name, sp.prefix) {
			next = i
		}
	}
	if next < 0 || next < rc.part {
		return errdefs.Invalid("archive", "an entry out of place: "+strconv.Quote(firstComponent(h.Name)))
	}
	if next != rc.part {
		if err := rc.finish(); err != nil {
			return err
		}
		rc.part = next
		rc.put = rc.p.startPut(rc.ctx, rc.id, seedParts[next].mount)
	}
	prefix := seedParts[rc.part].prefix
	h.Name = "./" + strings.TrimPrefix(h.Name, prefix)
	if h.Typeflag == tar.TypeLink {
		h.Linkname = "./" + strings.TrimPrefix(h.Linkname, prefix)
	}
	if err := rc.put.tw.WriteHeader(h); err != nil {
		return rc.put.failure(err)
	}
	n, err := io.Copy(rc.put.tw, data)
	if err != nil {
		return rc.put.failure(err)
	}
	rc.got.Entries++
	rc.got.Bytes += n
	return nil
}

// finish ends the current volume's put, if any.
func (rc *receiver) finish() error {
	if rc.put == nil {
		return nil
	}
	put := rc.put
	rc.put = nil
	return put.finish()
}

// abort ends a put still open (a failed receive).
func (rc *receiver) abort() {
	if rc.put != nil {
		rc.put.abort()
	}
}

// checkTrailer reads the trailer's body and compares it with what was
// imported (both volumes present).
func checkTrailer(tr *tar.Reader, got trailer, part int) (trailer, error) {
	body, err := io.ReadAll(io.LimitReader(tr, maxTrailerBytes))
	if err != nil {
		return trailer{}, errdefs.Invalid("archive", "its trailer does not read")
	}
	var want trailer
	if err := json.Unmarshal(body, &want); err != nil {
		return trailer{}, errdefs.Invalid("archive", "its trailer does not decode")
	}
	if part != len(seedParts)-1 || want.Entries != got.Entries || want.Bytes != got.Bytes {
		return trailer{}, errdefs.Invalid("archive", "its trailer does not count what came before it")
	}
	return want, nil
}

// firstComponent is name's first path component, for a refusal.
func firstComponent(name string) string {
	first, _, _ := strings.Cut(name, "/")
	return first
}

// archivePut is one archive put into a container in progress, fed
// through a pipe.
type archivePut struct {
	pw   *io.PipeWriter
	tw   *tar.Writer
	done chan error
	// ended: finish or abort waited for the engine already.
	ended bool
}

// startPut starts an archive put of a tar written to the returned put's
// tw into dir of container id.
func (p *Provider) startPut(ctx context.Context, id, dir string) *archivePut {
	pr, pw := io.Pipe()
	put := &archivePut{pw: pw, tw: tar.NewWriter(pw), done: make(chan error, 1)}
	go func() {
		_, err := p.cli.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: dir, Content: pr})
		_ = pr.CloseWithError(err)
		put.done <- err
	}()
	return put
}

// finish ends the put's tar and waits for the engine's answer.
func (a *archivePut) finish() error {
	err := a.tw.Close()
	_ = a.pw.CloseWithError(err)
	a.ended = true
	if perr := <-a.done; perr != nil {
		return fmt.Errorf("write a volume: %w", errdefs.ErrComputeUnconfirmed)
	}
	if err != nil {
		return fmt.Errorf("write a volume: %w", errdefs.ErrComputeUnconfirmed)
	}
	return nil
}

// failure ends the put after err and returns the error to answer.
func (a *archivePut) failure(err error) error {
	a.abort()
	return fmt.Errorf("write a volume: %w", errdefs.ErrComputeUnconfirmed)
}

// abort ends the put with an error and waits for the engine.
func (a *archivePut) abort() {
	if a.ended {
		return
	}
	a.ended = true
	_ = a.pw.CloseWithError(errors.New("import aborted"))
	<-a.done
}
