package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"

	adminv1 "berth.dev/proto/berth/admin/v1"
)

// filesBytes is F1's tree: P7's 100 MB generator (a large file and a
// hundred small ones).
const filesBytes = 100_000_000

// filesRows measures F1: UploadFiles then DownloadFiles of a 100 MB tree
// through the admin API, Core and the Session's Runtime, against the
// engine's archive put then get of the same tar on the same container with
// the same client process. Both sides start from the same tar in memory
// and drain the download into a hash; the samples interleave.
func (r *rig) filesRows(samples int) []*row {
	r.t.Helper()
	f1 := &row{ID: "F1", Kind: latency, Goal: 1.3,
		Measure:  "UploadFiles then DownloadFiles of a 100 MB tree (tar) through Core and the Runtime",
		Baseline: "engine: archive put then get of the same tar on the same container"}
	archive := workspaceArchive(r.t, filesBytes, 33)
	_, session := r.admitted()
	container := r.sessionContainer(session)
	files := adminv1.NewFileServiceClient(r.cluster.CC)
	for range samples {
		f1.add(r.filesRoundTrip(files, session, archive), r.engineRoundTrip(container, archive), 0)
	}
	r.deleteSession(session)
	return []*row{f1}
}

// filesRoundTrip uploads archive under /workspace/f1 and downloads it.
func (r *rig) filesRoundTrip(files adminv1.FileServiceClient, session string, archive []byte) time.Duration {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.ctx, sampleTimeout)
	defer cancel()
	start := time.Now()
	up, err := files.UploadFiles(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := up.Send(&adminv1.UploadFilesRequest{Message: &adminv1.UploadFilesRequest_Header{Header: &adminv1.UploadHeader{
		Name: session, RequestId: uuid.NewString(), Path: "f1", Format: adminv1.FileFormat_FILE_FORMAT_TAR}}}); err != nil {
		r.t.Fatal(err)
	}
	for rest := archive; len(rest) > 0; {
		n := min(len(rest), 1<<20)
		if err := up.Send(&adminv1.UploadFilesRequest{Message: &adminv1.UploadFilesRequest_Data{Data: rest[:n]}}); err != nil {
			break // CloseAndRecv says why
		}
		rest = rest[n:]
	}
	if res, err := up.CloseAndRecv(); err != nil || res.GetFiles() != 101 {
		r.t.Fatalf("UploadFiles: %v, %v", res, err)
	}
	down, err := files.DownloadFiles(ctx, &adminv1.DownloadFilesRequest{Name: session, Path: "f1", Format: adminv1.FileFormat_FILE_FORMAT_TAR})
	if err != nil {
		r.t.Fatal(err)
	}
	h := sha256.New()
	for {
		m, err := down.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			r.t.Fatalf("DownloadFiles: %v", err)
		}
		h.Write(m.GetData())
	}
	d := time.Since(start)
	_ = h.Sum(nil)
	return d
}

// engineRoundTrip puts archive under /workspace/base of the container and
// gets that directory back, draining it into a hash.
func (r *rig) engineRoundTrip(container string, archive []byte) time.Duration {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.ctx, sampleTimeout)
	defer cancel()
	cli := r.cluster.Engine
	start := time.Now()
	if _, err := cli.CopyToContainer(ctx, container, client.CopyToContainerOptions{DestinationPath: "/workspace", Content: bytes.NewReader(archive)}); err != nil {
		r.t.Fatalf("engine archive put: %v", err)
	}
	res, err := cli.CopyFromContainer(ctx, container, client.CopyFromContainerOptions{SourcePath: "/workspace/workspace"})
	if err != nil {
		r.t.Fatalf("engine archive get: %v", err)
	}
	h := sha256.New()
	_, err = io.Copy(h, res.Content)
	res.Content.Close()
	if err != nil {
		r.t.Fatalf("engine archive get: %v", err)
	}
	return time.Since(start)
}
