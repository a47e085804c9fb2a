package runtimeclient

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	runtimev1 "berth.dev/proto/berth/runtime/v1"
	"berth.dev/runtimebootstrap/filexfer"
	"berth.dev/runtimebootstrap/internal/gatewaytest"
)

const transferID = "0b7e5a52-8f0e-4d7c-9a43-3c1d2e4f5a6b"

func upload(path string) *runtimev1.OpenTransfer {
	return &runtimev1.OpenTransfer{TransferId: transferID, Direction: runtimev1.TransferDirection_TRANSFER_DIRECTION_UPLOAD, Path: path}
}

func entryMsg(name string, kind runtimev1.FileEntry_Kind, mode uint32, size int64, link string) *runtimev1.TransferResponse {
	return &runtimev1.TransferResponse{Message: &runtimev1.TransferResponse_Entry{Entry: &runtimev1.FileEntry{
		Name: name, Kind: kind, Mode: mode, Size: size, LinkTarget: link, MtimeUnixNano: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(),
	}}}
}

func dataMsg(b []byte) *runtimev1.TransferResponse {
	return &runtimev1.TransferResponse{Message: &runtimev1.TransferResponse_Data{Data: b}}
}

var commitMsg = &runtimev1.TransferResponse{Message: &runtimev1.TransferResponse_Commit{Commit: &runtimev1.TransferCommit{}}}

// acceptTransfer takes the next Transfer stream, checks its hello and
// accepts it.
func acceptTransfer(t *testing.T, h *harness) *gatewaytest.Transfer {
	t.Helper()
	tr := h.core.AcceptTransfer(t)
	hello := tr.Accept()
	if hello.GetTransferId() != transferID || hello.GetDeviceId() != testDevice || hello.GetCredential() != testCredential ||
		hello.GetProtocolVersion() != runtimev1.ProtocolVersion {
		t.Fatalf("transfer hello %v", hello)
	}
	return tr
}

// sendTree uploads a small tree: a directory, a 1.5 MiB file in two
// chunks, an empty file and a symlink.
func sendTree(tr *gatewaytest.Transfer, big []byte) {
	tr.Send(entryMsg("sub", runtimev1.FileEntry_KIND_DIRECTORY, 0o750, 0, ""))
	tr.Send(entryMsg("sub/big", runtimev1.FileEntry_KIND_FILE, 0o755, int64(len(big)), ""))
	tr.Send(dataMsg(big[:1<<20]))
	tr.Send(dataMsg(big[1<<20:]))
	tr.Send(entryMsg("empty", runtimev1.FileEntry_KIND_FILE, 0o600, 0, ""))
	tr.Send(entryMsg("link", runtimev1.FileEntry_KIND_SYMLINK, 0o777, 0, "sub/big"))
	tr.Send(commitMsg)
}

func bigData() []byte {
	big := make([]byte, 3<<19)
	for i := range big {
		big[i] = byte(i * 7)
	}
	return big
}

// wantDone fails the test unless the next message is done with want, and
// then ends the stream once the Runtime closed its side.
func wantDone(t *testing.T, tr *gatewaytest.Transfer, want *runtimev1.TransferDone) {
	t.Helper()
	m := tr.Next()
	d := m.GetDone()
	if d == nil || d.GetFiles() != want.GetFiles() || d.GetDirectories() != want.GetDirectories() ||
		d.GetSymlinks() != want.GetSymlinks() || d.GetBytes() != want.GetBytes() {
		t.Fatalf("got %v, want done %v", m, want)
	}
	if rest := tr.Ended(); len(rest) != 0 {
		t.Fatalf("messages after done: %v", rest)
	}
	tr.End(nil)
}

func noTemps(t *testing.T, root string) {
	t.Helper()
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), filexfer.TempPrefix) {
			t.Errorf("temporary file left: %s", p)
		}
		return nil
	})
}

func TestPreparedAnnouncesFiles(t *testing.T) {
	h := start(t)
	c := h.accept(t)
	c.Welcome(false)
	if p := c.Next().GetPrepared(); p == nil || !slices.Contains(p.GetCapabilities(), runtimev1.CapabilityFiles) {
		t.Fatalf("prepared %v", p)
	}
}

func TestUploadLandsTheTree(t *testing.T) {
	h := start(t)
	c := h.accept(t)
	c.Welcome(true)
	c.OpenTransfer(upload("/workspace/dest"))
	tr := acceptTransfer(t, h)
	big := bigData()
	sendTree(tr, big)
	wantDone(t, tr, &runtimev1.TransferDone{Files: 2, Directories: 1, Symlinks: 1, Bytes: int64(len(big))})

	dest := filepath.Join(h.workspace, "dest")
	if got, err := os.ReadFile(filepath.Join(dest, "sub", "big")); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("sub/big: %d bytes, %v", len(got), err)
	}
	for name, mode := range map[string]os.FileMode{"sub": 0o750, "sub/big": 0o755, "empty": 0o600} {
		if info, err := os.Lstat(filepath.Join(dest, name)); err != nil || info.Mode().Perm() != mode {
			t.Errorf("%s: %v, %v; want mode %v", name, info.Mode(), err, mode)
		}
	}
	if target, err := os.Readlink(filepath.Join(dest, "link")); err != nil || target != "sub/big" {
		t.Fatalf("link -> %q, %v", target, err)
	}
	noTemps(t, h.workspace)
	c.Keepalive(1) // the connection goes on
}

func TestUploadRefusedLeavesNoTemporaryFile(t *testing.T) {
	h := start(t)
	c := h.accept(t)
	c.Welcome(true)
	c.OpenTransfer(upload("."))
	tr := acceptTransfer(t, h)
	tr.Send(entryMsg("half", runtimev1.FileEntry_KIND_FILE, 0o644, 10, ""))
	tr.Send(dataMsg([]byte("12345")))
	tr.Send(entryMsg("../escape", runtimev1.FileEntry_KIND_FILE, 0o644, 1, ""))
	m := tr.Next()
	if r := m.GetRefused(); r == nil || r.GetReason() != filexfer.ReasonInvalidArchive || r.GetEntry() != 0 {
		t.Fatalf("got %v, want refused invalid_archive at entry 0", m)
	}
	tr.Ended()
	tr.End(nil)
	c.Keepalive(1)
	noTemps(t, h.workspace)
	if _, err := os.Lstat(filepath.Join(h.workspace, "half")); err == nil {
		t.Fatal("an unfinished file reached its name")
	}

	c.OpenTransfer(upload("."))
	tr = acceptTransfer(t, h)
	tr.Send(entryMsg("../escape", runtimev1.FileEntry_KIND_FILE, 0o644, 1, ""))
	if r := tr.Next().GetRefused(); r == nil || r.GetReason() != filexfer.ReasonPathEscapes {
		t.Fatalf("refused %v, want path_escapes_workspace", r)
	}
	tr.Ended()
	tr.End(nil)
	if _, err := os.Lstat(filepath.Join(filepath.Dir(h.workspace), "escape")); err == nil {
		t.Fatal("a file escaped the workspace")
	}
}

func TestDownloadReproducesTheTree(t *testing.T) {
	h := start(t)
	c := h.accept(t)
	c.Welcome(true)
	big := bigData()
	src := filepath.Join(h.workspace, "src")
	if err := os.MkdirAll(filepath.Join(src, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "sub", "big"), big, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub/big", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	c.OpenTransfer(&runtimev1.OpenTransfer{TransferId: transferID, Direction: runtimev1.TransferDirection_TRANSFER_DIRECTION_DOWNLOAD, Path: "src"})
	tr := acceptTransfer(t, h)
	sum := tr.Next().GetSummary()
	if sum == nil || sum.GetEntries() != 3 || sum.GetBytes() != int64(len(big)) {
		t.Fatalf("summary %v", sum)
	}
	// Rebuild the tree from the messages with a Writer in another root.
	out := t.TempDir()
	w, err := filexfer.NewWriter(filexfer.WriterConfig{Root: out, OpID: "check"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for {
		m := tr.Next()
		if d := m.GetDone(); d != nil {
			if d.GetFiles() != 1 || d.GetDirectories() != 1 || d.GetSymlinks() != 1 || d.GetBytes() != int64(len(big)) {
				t.Fatalf("done %v", d)
			}
			break
		}
		switch {
		case m.GetEntry() != nil:
			err = w.Begin(toEntry(m.GetEntry()))
		case m.GetData() != nil:
			if len(m.GetData()) > runtimev1.MaxTransferChunk {
				t.Fatalf("chunk of %d bytes", len(m.GetData()))
			}
			_, err = w.Write(m.GetData())
		default:
			t.Fatalf("unexpected %v", m)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	tr.Ended()
	tr.End(nil)
	if got, err := os.ReadFile(filepath.Join(out, "sub", "big")); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("sub/big: %d bytes, %v", len(got), err)
	}
	if info, _ := os.Lstat(filepath.Join(out, "sub", "big")); info.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v", info.Mode())
	}
	if target, _ := os.Readlink(filepath.Join(out, "link")); target != "sub/big" {
		t.Fatalf("link -> %q", target)
	}

	c.OpenTransfer(&runtimev1.OpenTransfer{TransferId: transferID, Direction: runtimev1.TransferDirection_TRANSFER_DIRECTION_DOWNLOAD, Path: "missing"})
	tr = acceptTransfer(t, h)
	if r := tr.Next().GetRefused(); r == nil || r.GetReason() != filexfer.ReasonNotFound {
		t.Fatalf("refused %v", r)
	}
	tr.Ended()
	tr.End(nil)
}

func TestUploadBesideARunningTurn(t *testing.T) {
	h := start(t)
	c := h.accept(t)
	c.Welcome(true)
	runTurn(c, shellTurn("a", "echo ready; sleep 0.3; echo done"))
	c.OpenTransfer(upload("."))
	tr := acceptTransfer(t, h)
	big := bigData()
	sendTree(tr, big)
	wantDone(t, tr, &runtimev1.TransferDone{Files: 2, Directories: 1, Symlinks: 1, Bytes: int64(len(big))})
	r := collect(t, c, "a", nil)
	if r.stdout.String() != "ready\ndone\n" || r.result.GetExitCode() != 0 {
		t.Fatalf("turn: %q %v", r.stdout.String(), r.result)
	}
}

func TestQuiesceDrainsTransfers(t *testing.T) {
	old := transferDrain
	transferDrain = 200 * time.Millisecond
	t.Cleanup(func() { transferDrain = old })
	h := start(t)
	c := h.accept(t)
	c.Welcome(true)
	c.OpenTransfer(upload("."))
	tr := acceptTransfer(t, h)
	tr.Send(entryMsg("f", runtimev1.FileEntry_KIND_FILE, 0o644, 10, ""))
	tr.Send(dataMsg([]byte("12345")))

	c.Quiesce("token-1")
	wantRejected(t, c, "token-1", runtimev1.ReasonFileWorkPending)
	h.noMarker(t)
	c.Keepalive(1)

	tr.Send(dataMsg([]byte("67890")))
	tr.Send(commitMsg)
	wantDone(t, tr, &runtimev1.TransferDone{Files: 1, Bytes: 10})
	c.Quiesce("token-2")
	wantAck(t, c, "token-2")
	h.markerHolds(t, "token-2")

	// Admission is closed: no Transfer stream is opened.
	c.OpenTransfer(upload("."))
	c.Keepalive(2)
	if _, ok := h.core.TryAcceptTransfer(t, 300*time.Millisecond); ok {
		t.Fatal("a transfer stream was opened after quiesce_ack")
	}
}

func TestConnectionEndMidUploadLeavesNoTemporaryFile(t *testing.T) {
	h := start(t)
	c := h.accept(t)
	c.Welcome(true)
	c.OpenTransfer(upload("dest"))
	tr := acceptTransfer(t, h)
	tr.Send(entryMsg("f", runtimev1.FileEntry_KIND_FILE, 0o644, 10, ""))
	tr.Send(dataMsg([]byte("12345")))
	c.Keepalive(1) // the entry and data were taken: Core's Send returned
	c.End(status.Error(codes.Unavailable, "core going away"))
	tr.Ended() // the connection's end ends its transfer
	// The client reconnects only after its transfers ended.
	c = h.accept(t)
	c.Welcome(true)
	noTemps(t, h.workspace)
	if _, err := os.Lstat(filepath.Join(h.workspace, "dest", "f")); err == nil {
		t.Fatal("an unfinished file reached its name")
	}
}

func TestPreparationSweepsJournals(t *testing.T) {
	h := start(t)
	c := h.accept(t)
	c.Welcome(true) // the journal directory exists from now on
	journals := filepath.Join(string(h.park), "transfers")
	tmp := filepath.Join("sub", filexfer.TempPrefix+"dead-1")
	if err := os.MkdirAll(filepath.Join(h.workspace, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.workspace, tmp), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(journals, "dead"), []byte("sub\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.End(status.Error(codes.Unavailable, "next connection"))
	c = h.accept(t)
	c.Welcome(true)
	noTemps(t, h.workspace)
	if entries, err := os.ReadDir(journals); err != nil || len(entries) != 0 {
		t.Fatalf("journals %v, %v", entries, err)
	}
	if !strings.Contains(h.logs.String(), `"msg":"removed temporary files of interrupted uploads","removed":1`) {
		t.Fatalf("no sweep log line:\n%s", h.logs.String())
	}
}
