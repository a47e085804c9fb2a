package runtime

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/test/internal/stack"
)

// treeEntry is what a round trip must keep of one entry.
type treeEntry struct {
	typ    byte
	mode   int64 // permission bits as written back (setuid etc. dropped)
	digest string
	link   string
	mtime  int64 // seconds; 0: not compared (directories, symlinks)
}

// testTree is a tree of every kind the FileService writes, as a tar and
// as what must come back: files that span several 1 MiB chunks, an empty
// file, modes (a setuid bit that is dropped), relative and absolute
// symlinks inside the workspace, a hard link, nested directories and
// modification times.
func testTree(t *testing.T) ([]byte, map[string]treeEntry) {
	t.Helper()
	mtime := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	want := map[string]treeEntry{}
	add := func(h *tar.Header, data []byte) {
		h.ModTime, h.Format = mtime, tar.FormatPAX
		h.Size = int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
		e := treeEntry{typ: h.Typeflag, mode: h.Mode & 0o777, link: h.Linkname}
		name := strings.TrimSuffix(h.Name, "/")
		switch h.Typeflag {
		case tar.TypeReg:
			sum := sha256.Sum256(data)
			e.digest, e.mtime = hex.EncodeToString(sum[:]), mtime.Unix()
		case tar.TypeLink:
			// Read back as a hard link or as the same file's bytes.
			e.typ, e.link = tar.TypeReg, ""
			e.digest, e.mtime = want[h.Linkname].digest, mtime.Unix()
			e.mode = want[h.Linkname].mode
		case tar.TypeSymlink, tar.TypeDir:
			e.mode = 0
		}
		want[name] = e
	}
	random := func(n int) []byte {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return b
	}
	add(&tar.Header{Name: "src/", Typeflag: tar.TypeDir, Mode: 0o755}, nil)
	add(&tar.Header{Name: "src/deep/", Typeflag: tar.TypeDir, Mode: 0o750}, nil)
	add(&tar.Header{Name: "src/deep/big.bin", Typeflag: tar.TypeReg, Mode: 0o644}, random(3<<20+12345))
	add(&tar.Header{Name: "src/run.sh", Typeflag: tar.TypeReg, Mode: 0o755}, []byte("#!/bin/sh\necho ran\n"))
	add(&tar.Header{Name: "src/secret", Typeflag: tar.TypeReg, Mode: 0o600}, random(100))
	add(&tar.Header{Name: "src/setuid", Typeflag: tar.TypeReg, Mode: 0o4755}, random(10))
	add(&tar.Header{Name: "src/empty", Typeflag: tar.TypeReg, Mode: 0o644}, nil)
	add(&tar.Header{Name: "src/rel-link", Typeflag: tar.TypeSymlink, Linkname: "deep/big.bin"}, nil)
	add(&tar.Header{Name: "src/abs-link", Typeflag: tar.TypeSymlink, Linkname: "/workspace/up/src/run.sh"}, nil)
	add(&tar.Header{Name: "src/hard", Typeflag: tar.TypeLink, Linkname: "src/secret"}, nil)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), want
}

// readTree reads a tar into the form testTree compares, names relative
// to prefix; a hard link counts as its target's file.
func readTree(t *testing.T, r io.Reader, prefix string) map[string]treeEntry {
	t.Helper()
	got := map[string]treeEntry{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return got
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(h.Name, prefix), "/"), "/")
		if name == "" || name == "." {
			continue
		}
		e := treeEntry{typ: h.Typeflag, mode: h.Mode & 0o777, link: h.Linkname}
		switch h.Typeflag {
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(data)
			e.digest, e.mtime = hex.EncodeToString(sum[:]), h.ModTime.Unix()
		case tar.TypeLink:
			target := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(h.Linkname, prefix), "/"), "/")
			e = got[target]
			e.mtime = h.ModTime.Unix()
		case tar.TypeSymlink, tar.TypeDir:
			e.mode = 0
		}
		got[name] = e
	}
}

func (e *env) files() adminv1.FileServiceClient { return adminv1.NewFileServiceClient(e.cc) }

// upload sends data (a tar, or a raw file with size) to session's path.
func (e *env) upload(session, p string, format adminv1.FileFormat, data []byte, mode uint32) (*adminv1.UploadFilesResponse, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 3*time.Minute)
	defer cancel()
	st, err := e.files().UploadFiles(ctx)
	if err != nil {
		return nil, err
	}
	h := &adminv1.UploadHeader{Name: session, RequestId: uuid.NewString(), Path: p, Format: format}
	if format == adminv1.FileFormat_FILE_FORMAT_RAW {
		h.Size, h.Mode = int64(len(data)), mode
	}
	if err := st.Send(&adminv1.UploadFilesRequest{Message: &adminv1.UploadFilesRequest_Header{Header: h}}); err != nil {
		return st.CloseAndRecv()
	}
	for len(data) > 0 {
		n := min(len(data), 1<<20)
		if err := st.Send(&adminv1.UploadFilesRequest{Message: &adminv1.UploadFilesRequest_Data{Data: data[:n]}}); err != nil {
			return st.CloseAndRecv()
		}
		data = data[n:]
	}
	return st.CloseAndRecv()
}

// download reads session's path; header is the first message.
func (e *env) download(session, p string, format adminv1.FileFormat) (*adminv1.DownloadHeader, []byte, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 3*time.Minute)
	defer cancel()
	st, err := e.files().DownloadFiles(ctx, &adminv1.DownloadFilesRequest{Name: session, Path: p, Format: format})
	if err != nil {
		return nil, nil, err
	}
	var header *adminv1.DownloadHeader
	var out bytes.Buffer
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return header, out.Bytes(), nil
		}
		if err != nil {
			return header, out.Bytes(), err
		}
		switch x := m.GetMessage().(type) {
		case *adminv1.DownloadFilesResponse_Header:
			header = x.Header
		case *adminv1.DownloadFilesResponse_Data:
			if header == nil || len(x.Data) > 1<<20 {
				e.t.Fatalf("data before the header or over 1 MiB (%d bytes)", len(x.Data))
			}
			out.Write(x.Data)
		}
	}
}

// engineArchive reads path of the Session's running container straight
// from the engine: what is really there, not Berth's report of it.
func (e *env) engineArchive(session, p string) io.ReadCloser {
	e.t.Helper()
	running, _, _ := e.allocationContainers(e.session(session).GetAllocation())
	if len(running) != 1 {
		e.t.Fatalf("running containers of %s: %v", session, running)
	}
	res, err := e.docker.CopyFromContainer(e.ctx, strings.TrimPrefix(running[0], "/"), client.CopyFromContainerOptions{SourcePath: p})
	if err != nil {
		e.t.Fatalf("engine archive of %s: %v", p, err)
	}
	return res.Content
}

// outsideDigest hashes, through the engine, everything of the container's
// writable filesystems outside the workspace: the home volume (bootstrap,
// journal) and the tmpfs.
func (e *env) outsideDigest(session string) string {
	e.t.Helper()
	h := sha256.New()
	for _, p := range []string{"/home", "/tmp"} {
		rc := e.engineArchive(session, p)
		tr := tar.NewReader(rc)
		for {
			hd, err := tr.Next()
			if err != nil {
				break
			}
			if strings.Contains(hd.Name, "/transfers/") {
				continue // the Runtime's own upload journal
			}
			fmt.Fprintf(h, "%s %o %d %s\n", hd.Name, hd.Mode, hd.Size, hd.Linkname)
			_, _ = io.Copy(h, tr)
		}
		rc.Close()
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestFilesRoundTripThroughTheRuntime is issue 33's black-box test of
// files over the real binaries and engine: a tree uploaded is in the
// container byte-identical with its modes, links and times (read from the
// engine), and downloads back the same; a raw file goes both ways; a
// hostile corpus is refused with its fixed reasons and nothing is written
// outside the workspace; an upload to a suspended Session wakes it.
func TestFilesRoundTripThroughTheRuntime(t *testing.T) {
	e := newEnvSpec(t, suspendingSpec())
	name := e.createSession()
	tarball, want := testTree(t)

	resp, err := e.upload(name, "up", adminv1.FileFormat_FILE_FORMAT_TAR, tarball, 0)
	if err != nil {
		t.Fatalf("upload: %v (reason %q)", err, stack.AdminReason(err))
	}
	if resp.GetFiles() != 5 || resp.GetDirectories() != 2 || resp.GetSymlinks() != 2 || resp.GetHardlinks() != 1 || resp.GetModesMasked() != 1 {
		t.Fatalf("upload answered %v", resp)
	}
	// The engine's view of the container.
	rc := e.engineArchive(name, "/workspace/up")
	got := readTree(t, rc, "up")
	rc.Close()
	wantFiles := map[string]treeEntry{}
	for k, v := range want {
		wantFiles[k] = v
	}
	if diff := treeDiff(wantFiles, got); diff != "" {
		t.Fatalf("the engine's view after the upload differs:\n%s", diff)
	}
	// A Turn sees it and the uid is the Runtime's.
	r := e.run(name, shell("stat -c '%u %a' /workspace/up/src/setuid && /workspace/up/src/run.sh"))
	if string(r.stdout) != "1000 755\nran\n" {
		t.Fatalf("turn over the upload: %v", r)
	}

	// Download the tree back.
	header, data, err := e.download(name, "up", adminv1.FileFormat_FILE_FORMAT_TAR)
	if err != nil {
		t.Fatalf("download: %v (reason %q)", err, stack.AdminReason(err))
	}
	if header.GetEntries() != int64(len(want)) {
		t.Fatalf("download header %v, want %d entries", header, len(want))
	}
	if diff := treeDiff(want, readTree(t, bytes.NewReader(data), "")); diff != "" {
		t.Fatalf("the download differs:\n%s", diff)
	}

	// Raw both ways.
	raw := make([]byte, 1<<20+7)
	_, _ = rand.Read(raw)
	if _, err := e.upload(name, "/workspace/raw.bin", adminv1.FileFormat_FILE_FORMAT_RAW, raw, 0o640); err != nil {
		t.Fatalf("raw upload: %v", err)
	}
	if _, back, err := e.download(name, "raw.bin", adminv1.FileFormat_FILE_FORMAT_RAW); err != nil || !bytes.Equal(back, raw) {
		t.Fatalf("raw download: %d bytes, %v", len(back), err)
	}
	if _, _, err := e.download(name, "up", adminv1.FileFormat_FILE_FORMAT_RAW); stack.AdminReason(err) != "not_a_regular_file" {
		t.Fatalf("raw download of a directory: %v", err)
	}
	if _, _, err := e.download(name, "absent", adminv1.FileFormat_FILE_FORMAT_TAR); stack.AdminReason(err) != "file_not_found" {
		t.Fatalf("download of a missing path: %v", err)
	}

	t.Run("hostile corpus", func(t *testing.T) { hostileCorpus(t, e, name) })

	// An upload to a suspended Session wakes it.
	if _, err := e.sessions.SuspendSession(e.ctx, &adminv1.SuspendSessionRequest{Name: name, RequestId: uuid.NewString()}); err != nil {
		t.Fatalf("SuspendSession: %v", err)
	}
	e.waitPhase(name, adminv1.ComputePhase_COMPUTE_PHASE_SUSPENDED, time.Minute)
	if _, err := e.upload(name, "woken.txt", adminv1.FileFormat_FILE_FORMAT_RAW, []byte("awake\n"), 0); err != nil {
		t.Fatalf("upload to a suspended session: %v (reason %q)", err, stack.AdminReason(err))
	}
	if s := e.session(name); s.GetEnvironment().GetComputePhase() != adminv1.ComputePhase_COMPUTE_PHASE_RUNNING {
		t.Fatalf("after the upload the session is %v", s.GetEnvironment())
	}
	r = e.run(name, shell("cat /workspace/woken.txt && sha256sum /workspace/raw.bin"))
	sum := sha256.Sum256(raw)
	if !strings.HasPrefix(string(r.stdout), "awake\n"+hex.EncodeToString(sum[:])) {
		t.Fatalf("after the wake: %v", r)
	}
}

// hostileCorpus uploads archives that try to leave the workspace or
// carry what is never written; each is refused with its reason, and the
// engine shows nothing changed outside the workspace and no marker file
// anywhere.
func hostileCorpus(t *testing.T, e *env, name string) {
	before := e.outsideDigest(name)
	type entry struct {
		h    tar.Header
		data string
	}
	cases := map[string]struct {
		entries []entry
		reason  string
	}{
		"zip slip":           {[]entry{{tar.Header{Name: "../../berth-escape-1", Typeflag: tar.TypeReg, Mode: 0o644}, "x"}}, "path_escapes_workspace"},
		"absolute name":      {[]entry{{tar.Header{Name: "/tmp/berth-escape-2", Typeflag: tar.TypeReg, Mode: 0o644}, "x"}}, "path_absolute"},
		"symlink to root":    {[]entry{{tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/"}, ""}, {tar.Header{Name: "l/tmp/berth-escape-3", Typeflag: tar.TypeReg, Mode: 0o644}, "x"}}, "symlink_escapes_workspace"},
		"symlink up":         {[]entry{{tar.Header{Name: "u", Typeflag: tar.TypeSymlink, Linkname: "../../tmp"}, ""}}, "symlink_escapes_workspace"},
		"hard link outside":  {[]entry{{tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "/home/runtime/bootstrap.json"}, ""}}, "hardlink_outside_archive"},
		"device":             {[]entry{{tar.Header{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3, Mode: 0o666}, ""}}, "file_type_refused"},
		"fifo":               {[]entry{{tar.Header{Name: "fifo", Typeflag: tar.TypeFifo, Mode: 0o644}, ""}}, "file_type_refused"},
		"duplicate":          {[]entry{{tar.Header{Name: "d", Typeflag: tar.TypeReg, Mode: 0o644}, "1"}, {tar.Header{Name: "./d", Typeflag: tar.TypeReg, Mode: 0o644}, "2"}}, "duplicate_entry"},
		"file over dir":      {[]entry{{tar.Header{Name: "src", Typeflag: tar.TypeReg, Mode: 0o644}, "x"}}, "type_conflict"},
		"name too long":      {[]entry{{tar.Header{Name: strings.Repeat("n", 256), Typeflag: tar.TypeReg, Mode: 0o644}, "x"}}, "path_too_long"},
		"huge sparse header": {[]entry{{tar.Header{Name: "sparse", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1 << 40}, ""}}, "file_too_large"},
	}
	for cname, c := range cases {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, en := range c.entries {
			h := en.h
			h.Format = tar.FormatPAX
			if h.Size == 0 {
				h.Size = int64(len(en.data))
			}
			if err := tw.WriteHeader(&h); err != nil {
				t.Fatalf("%s: %v", cname, err)
			}
			_, _ = tw.Write([]byte(en.data))
		}
		// The huge header's data is never sent: the refusal comes first.
		if c.reason != "file_too_large" {
			_ = tw.Close()
		}
		_, err := e.upload(name, "up", adminv1.FileFormat_FILE_FORMAT_TAR, buf.Bytes(), 0)
		if got := stack.AdminReason(err); got != c.reason {
			t.Errorf("%s: %v (reason %q), want %q", cname, err, got, c.reason)
		}
	}
	// A destination outside the workspace is refused before anything.
	for p, reason := range map[string]string{"/etc": "path_absolute", "../x": "path_escapes_workspace", "/workspace/../etc": "path_absolute"} {
		if _, err := e.upload(name, p, adminv1.FileFormat_FILE_FORMAT_RAW, []byte("x"), 0); stack.AdminReason(err) != reason {
			t.Errorf("destination %q: %v, want %q", p, err, reason)
		}
	}
	if after := e.outsideDigest(name); after != before {
		t.Error("the container's files outside the workspace changed")
	}
	r := e.run(name, shell("find / -xdev -name 'berth-escape*' 2>/dev/null; find /tmp /home /workspace -name 'berth-escape*' -o -name '.berth-upload-*' 2>/dev/null; true"))
	if len(bytes.TrimSpace(r.stdout)) != 0 {
		t.Errorf("found after the hostile corpus: %q", r.stdout)
	}
}

// treeDiff names every difference between want and got.
func treeDiff(want, got map[string]treeEntry) string {
	var out []string
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			out = append(out, "missing "+k)
		case g != w:
			out = append(out, fmt.Sprintf("%s: got %+v, want %+v", k, g, w))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			out = append(out, "extra "+path.Clean(k))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// openUpload starts an upload of a tar to session and sends only its
// header: the operation is admitted and waits for its bytes.
func (e *env) openUpload(ctx context.Context, session string) adminv1.FileService_UploadFilesClient {
	e.t.Helper()
	st, err := e.files().UploadFiles(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := st.Send(&adminv1.UploadFilesRequest{Message: &adminv1.UploadFilesRequest_Header{Header: &adminv1.UploadHeader{
		Name: session, RequestId: uuid.NewString(), Path: "open", Format: adminv1.FileFormat_FILE_FORMAT_TAR}}}); err != nil {
		e.t.Fatal(err)
	}
	return st
}

// fileOps counts the installation's file operations in state, from the
// database.
func (e *env) fileOps(state string) int {
	e.t.Helper()
	var n int
	if err := e.core.Store(e.t).Pool().QueryRow(e.ctx, `SELECT count(*) FROM file_operations WHERE state = $1`, state).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// TestFileOperationsBoundAndEnd: a Session takes at most 4 file
// operations at once (the fifth is refused session_file_limit, naming
// the bound); while one is open the Session is busy and is not suspended;
// operations whose Core died are ended by the next Core, so the Session
// suspends again; and a deletion ends an open upload with session_deleted.
func TestFileOperationsBoundAndEnd(t *testing.T) {
	e := newEnvSpec(t, suspendingSpec())
	name := e.createSession()
	if r := e.run(name, shell("true")); r.turn.GetState() != adminv1.Turn_STATE_COMPLETED {
		t.Fatalf("first turn: %v", r)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	for range 4 {
		e.openUpload(ctx, name)
	}
	stack.WaitFor(t, time.Minute, "4 running file operations", func() bool { return e.fileOps("running") == 4 })
	_, err := e.upload(name, "fifth", adminv1.FileFormat_FILE_FORMAT_RAW, []byte("x"), 0)
	if stack.AdminReason(err) != "session_file_limit" || !strings.Contains(err.Error(), "files_per_session (4)") {
		t.Fatalf("fifth upload: %v", err)
	}
	if _, err := e.sessions.SuspendSession(e.ctx, &adminv1.SuspendSessionRequest{Name: name, RequestId: uuid.NewString()}); stack.AdminReason(err) != "session_busy" {
		t.Fatalf("SuspendSession with open uploads: %v, want session_busy", err)
	}

	// Core dies with the admin calls: the next Core ends their operations.
	e.core.Kill()
	e.restartCore()
	stack.WaitFor(t, time.Minute, "the open operations ended", func() bool {
		return e.fileOps("running")+e.fileOps("pending") == 0
	})
	if n := e.fileOps("failed"); n != 4 {
		t.Fatalf("%d failed operations, want 4", n)
	}
	e.waitAdmitted(name)
	if _, err := e.sessions.SuspendSession(e.ctx, &adminv1.SuspendSessionRequest{Name: name, RequestId: uuid.NewString()}); err != nil {
		t.Fatalf("SuspendSession after the operations ended: %v", err)
	}
	e.waitPhase(name, adminv1.ComputePhase_COMPUTE_PHASE_SUSPENDED, time.Minute)

	// An open upload (it woke the Session) ends with the Session's
	// deletion, without the client sending anything more.
	st := e.openUpload(e.ctx, name)
	stack.WaitFor(t, 2*time.Minute, "the upload running", func() bool { return e.fileOps("running") == 1 })
	if _, err := e.sessions.DeleteSession(e.ctx, &adminv1.DeleteSessionRequest{Name: name}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		var resp adminv1.UploadFilesResponse
		done <- st.RecvMsg(&resp) // no CloseSend: the server ends the call
	}()
	select {
	case err := <-done:
		if stack.AdminReason(err) != "session_deleted" {
			t.Fatalf("upload during the deletion: %v, want session_deleted", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the upload did not end with the deletion")
	}
}

// TestUploadEndsWhenTheSandboxDies: the engine kills the Session's
// container mid-upload; the call ends with a fixed reason (the Runtime's
// connection ended, or the Environment failed first), the operation is not
// left open, and once the Session is deleted the engine holds nothing of
// it (the suite's end checks the engine).
func TestUploadEndsWhenTheSandboxDies(t *testing.T) {
	e := newEnv(t)
	name := e.createSession()
	ctx, cancel := context.WithTimeout(e.ctx, 3*time.Minute)
	defer cancel()
	st := e.openUpload(ctx, name)
	var hdr bytes.Buffer
	tw := tar.NewWriter(&hdr)
	if err := tw.WriteHeader(&tar.Header{Name: "big.bin", Typeflag: tar.TypeReg, Mode: 0o644, Size: 64 << 20, Format: tar.FormatPAX}); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	send := func(b []byte) error {
		return st.Send(&adminv1.UploadFilesRequest{Message: &adminv1.UploadFilesRequest_Data{Data: b}})
	}
	if err := send(hdr.Bytes()); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if err := send(chunk); err != nil {
			t.Fatal(err)
		}
	}
	stack.WaitFor(t, time.Minute, "the upload running", func() bool { return e.fileOps("running") == 1 })
	running, _, _ := e.allocationContainers(e.session(name).GetAllocation())
	if len(running) != 1 {
		t.Fatalf("running containers %v", running)
	}
	if _, err := e.docker.ContainerKill(e.ctx, strings.TrimPrefix(running[0], "/"), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	var err error
	for range 60 {
		if err = send(chunk); err != nil {
			break
		}
	}
	_, err = st.CloseAndRecv()
	switch stack.AdminReason(err) {
	case "file_operation_interrupted", "environment_failed":
	default:
		t.Fatalf("upload into a killed sandbox: %v", err)
	}
	stack.WaitFor(t, time.Minute, "no open file operation", func() bool {
		return e.fileOps("running")+e.fileOps("pending") == 0
	})
	if _, err := e.sessions.DeleteSession(e.ctx, &adminv1.DeleteSessionRequest{Name: name}); err != nil {
		t.Fatal(err)
	}
	stack.WaitFor(t, 2*time.Minute, name+" deleted", func() bool {
		return e.session(name).GetState() == adminv1.Session_STATE_DELETED
	})
	if running, snapshots, other := e.allocationContainers(e.session(name).GetAllocation()); len(running)+len(snapshots)+len(other) != 0 {
		t.Fatalf("left on the engine: %v %v %v", running, snapshots, other)
	}
}
