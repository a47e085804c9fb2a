package microsandbox_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/sandbox"
	"berth.dev/sandbox/microsandbox"
	"berth.dev/sandbox/testenv"
)

// pinnedDigest is the digest the planted image record carries.
const pinnedDigest = "sha256:08b78e972ab8579f93bd698d35b3aaa7a7fa7fa4a5b3df15485369d16331e790"

// stubMSB is a stand-in for msb in the probe's unit tests: it answers
// `--version` with the version in $MSB_HOME/version and `image inspect`
// with $MSB_HOME/image.json (msb's own JSON shape), or fails like msb when
// that file is absent. The real msb is exercised by TestProbeRealMSB.
const stubMSB = `#!/bin/sh
[ -f "$MSB_HOME/hang" ] && exec sleep 600
case "$1" in
--version) cat "$MSB_HOME/version" ;;
image)
	if [ "$2" = inspect ] && [ -f "$MSB_HOME/image.json" ]; then cat "$MSB_HOME/image.json"; exit 0; fi
	echo "error: image not found: $3" >&2; exit 1 ;;
*) echo "error: unexpected arguments" >&2; exit 2 ;;
esac
`

// probeHost is a planted host: its KVM device, CPU and memory tables, an
// msb installation (bin/msb, lib/libkrunfw) and msb's home.
type probeHost struct {
	dir  string
	host microsandbox.HostPaths
	cfg  microsandbox.NodeConfig
}

// newProbeHost plants a host on which the probe passes: /dev/null stands in
// for /dev/kvm (a read-write character device), two CPUs with vmx, 4 GiB,
// the pinned msb and libkrunfw, and the pinned image in msb's records.
func newProbeHost(t *testing.T) *probeHost {
	t.Helper()
	dir := t.TempDir()
	h := &probeHost{dir: dir, host: microsandbox.HostPaths{
		KVM:     "/dev/null",
		CPUInfo: filepath.Join(dir, "cpuinfo"),
		MemInfo: filepath.Join(dir, "meminfo"),
	}, cfg: microsandbox.NodeConfig{
		MSB:         filepath.Join(dir, "msb", "bin", "msb"),
		Home:        filepath.Join(dir, "home"),
		Image:       "berth-runtime:test",
		ImageDigest: pinnedDigest,
		Network:     "none",
	}}
	h.write(t, "cpuinfo", cpuinfo("vmx"))
	h.write(t, "meminfo", "MemTotal:        4194304 kB\nMemFree:         1000 kB\n")
	h.write(t, "msb/bin/msb", stubMSB)
	if err := os.Chmod(h.cfg.MSB, 0o755); err != nil {
		t.Fatal(err)
	}
	h.write(t, "msb/lib/"+microsandbox.PinnedLibkrunfw, "ELF")
	h.write(t, "home/version", "msb "+microsandbox.PinnedVersion+"\n")
	h.write(t, "home/image.json", `{"architecture":"amd64","digest":"`+pinnedDigest+`","os":"linux","reference":"berth-runtime:test","layer_count":1}`)
	return h
}

// cpuinfo is a two-processor /proc/cpuinfo whose flags include flag.
func cpuinfo(flag string) string {
	var b strings.Builder
	for n := range 2 {
		fmt.Fprintf(&b, "processor\t: %d\nvendor_id\t: GenuineIntel\nflags\t\t: fpu vme de pse tsc msr %s sse sse2\n\n", n, flag)
	}
	return b.String()
}

func (h *probeHost) write(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(h.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (h *probeHost) probe(res sandbox.Resources) error {
	p := microsandbox.New(microsandbox.Exec{Path: h.cfg.MSB, Home: h.cfg.Home}, microsandbox.Options{
		InstallationID: "0b6c3c3e-8a57-4d0e-9b53-2f7d3cf4c1aa",
		Config:         h.cfg,
		Resources:      res,
		Host:           h.host,
	})
	return p.Probe(context.Background())
}

var oneSandbox = sandbox.Resources{CPUMillis: 1000, MemoryBytes: 512 << 20, DiskBytes: 1 << 30}

// TestProbeDiagnostics plants each missing prerequisite on an otherwise
// ready host and checks the probe names exactly it, in the guide's order:
// platform, capacity, artifacts, then the pinned image.
func TestProbeDiagnostics(t *testing.T) {
	if err := newProbeHost(t).probe(oneSandbox); err != nil {
		t.Fatalf("ready host: %v", err)
	}
	cases := []struct {
		name  string
		plant func(t *testing.T, h *probeHost)
		res   sandbox.Resources
		want  string
	}{
		{"no KVM device", func(_ *testing.T, h *probeHost) { h.host.KVM = filepath.Join(h.dir, "no-kvm") }, oneSandbox, microsandbox.ProbeNoKVM},
		{"KVM path is not a device", func(_ *testing.T, h *probeHost) { h.host.KVM = h.host.MemInfo }, oneSandbox, microsandbox.ProbeNoKVM},
		{"no vmx or svm flag", func(t *testing.T, h *probeHost) { h.write(t, "cpuinfo", cpuinfo("hypervisor")) }, oneSandbox, microsandbox.ProbeNoVirtualization},
		{"AMD-V counts", func(t *testing.T, h *probeHost) {
			h.write(t, "cpuinfo", cpuinfo("svm"))
			h.write(t, "home/version", "msb 0.6.17\n")
		}, oneSandbox, microsandbox.ProbeMSBVersion},
		{"unreadable cpu table", func(_ *testing.T, h *probeHost) { h.host.CPUInfo = filepath.Join(h.dir, "none") }, oneSandbox, microsandbox.ProbeNoVirtualization},
		{"more CPUs than the host", func(*testing.T, *probeHost) {}, sandbox.Resources{CPUMillis: 2001, MemoryBytes: 512 << 20, DiskBytes: 1 << 30}, microsandbox.ProbeCapacity},
		{"more memory than the host", func(*testing.T, *probeHost) {}, sandbox.Resources{CPUMillis: 1000, MemoryBytes: 4<<30 + 1, DiskBytes: 1 << 30}, microsandbox.ProbeCapacity},
		{"unreadable memory table", func(_ *testing.T, h *probeHost) { h.host.MemInfo = filepath.Join(h.dir, "none") }, oneSandbox, microsandbox.ProbeCapacity},
		{"no msb", func(_ *testing.T, h *probeHost) { h.cfg.MSB = filepath.Join(h.dir, "msb", "bin", "absent") }, oneSandbox, microsandbox.ProbeMSBMissing},
		{"msb not executable", func(t *testing.T, h *probeHost) {
			if err := os.Chmod(h.cfg.MSB, 0o644); err != nil {
				t.Fatal(err)
			}
		}, oneSandbox, microsandbox.ProbeMSBMissing},
		{"msb home gone", func(t *testing.T, h *probeHost) {
			if err := os.RemoveAll(h.cfg.Home); err != nil {
				t.Fatal(err)
			}
		}, oneSandbox, microsandbox.ProbeHomeUnusable},
		{"another msb version", func(t *testing.T, h *probeHost) { h.write(t, "home/version", "msb 0.7.2\n") }, oneSandbox, microsandbox.ProbeMSBVersion},
		{"a version with a suffix", func(t *testing.T, h *probeHost) { h.write(t, "home/version", "msb 0.6.18-dev\n") }, oneSandbox, microsandbox.ProbeMSBVersion},
		{"msb fails on --version", func(t *testing.T, h *probeHost) {
			if err := os.Remove(filepath.Join(h.cfg.Home, "version")); err != nil {
				t.Fatal(err)
			}
		}, oneSandbox, microsandbox.ProbeMSBVersion},
		{"no libkrunfw", func(t *testing.T, h *probeHost) {
			if err := os.Remove(filepath.Join(h.dir, "msb", "lib", microsandbox.PinnedLibkrunfw)); err != nil {
				t.Fatal(err)
			}
		}, oneSandbox, microsandbox.ProbeLibkrunfwMissing},
		{"no image", func(t *testing.T, h *probeHost) {
			if err := os.Remove(filepath.Join(h.cfg.Home, "image.json")); err != nil {
				t.Fatal(err)
			}
		}, oneSandbox, microsandbox.ProbeImageMissing},
		{"image of another digest", func(_ *testing.T, h *probeHost) {
			h.cfg.ImageDigest = "sha256:" + strings.Repeat("a", 64)
		}, oneSandbox, microsandbox.ProbeImageMissing},
		{"unreadable image record", func(t *testing.T, h *probeHost) { h.write(t, "home/image.json", "not json") }, oneSandbox, microsandbox.ProbeImageMissing},
		// The order: a host without virtualization reports that, not the
		// missing image or msb behind it.
		{"virtualization before artifacts", func(t *testing.T, h *probeHost) {
			h.write(t, "cpuinfo", cpuinfo("pae"))
			h.cfg.MSB = filepath.Join(h.dir, "absent")
		}, oneSandbox, microsandbox.ProbeNoVirtualization},
		{"capacity before artifacts", func(_ *testing.T, h *probeHost) { h.cfg.MSB = filepath.Join(h.dir, "absent") },
			sandbox.Resources{CPUMillis: 3000, MemoryBytes: 512 << 20, DiskBytes: 1 << 30}, microsandbox.ProbeCapacity},
		{"artifacts before image", func(t *testing.T, h *probeHost) {
			h.write(t, "home/version", "msb 0.6.17\n")
			h.write(t, "home/image.json", "{}")
		}, oneSandbox, microsandbox.ProbeMSBVersion},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newProbeHost(t)
			c.plant(t, h)
			err := h.probe(c.res)
			if got := sandbox.ProbeCode(err); got != c.want {
				t.Fatalf("probe: %v (code %q), want %q", err, got, c.want)
			}
			if err.Error() != "probe: "+c.want {
				t.Errorf("probe error %q carries more than its code", err)
			}
		})
	}
}

// TestProbeOfAHungMSB: an msb that does not answer within the probe's
// context is ended (its process group), and the probe says only that it
// did not complete: no diagnostic claims what it could not check.
func TestProbeOfAHungMSB(t *testing.T) {
	h := newProbeHost(t)
	h.write(t, "home/hang", "")
	p := microsandbox.New(microsandbox.Exec{Path: h.cfg.MSB, Home: h.cfg.Home}, microsandbox.Options{
		Config: h.cfg, Resources: oneSandbox, Host: h.host,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := p.Probe(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || sandbox.ProbeCode(err) != "" {
		t.Fatalf("probe of a hung msb: %v (code %q), want the context's error and no code", err, sandbox.ProbeCode(err))
	}
}

// TestProbeFindsLibkrunfwBesideTheRealMSB: msb looks for libkrunfw beside
// its resolved executable, so a symlinked msb (/usr/local/bin/msb ->
// /opt/msb/bin/msb) is ready when /opt/msb/lib holds it.
func TestProbeFindsLibkrunfwBesideTheRealMSB(t *testing.T) {
	h := newProbeHost(t)
	link := filepath.Join(h.dir, "usr", "local", "bin", "msb")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(h.cfg.MSB, link); err != nil {
		t.Fatal(err)
	}
	h.cfg.MSB = link
	if err := h.probe(oneSandbox); err != nil {
		t.Fatalf("symlinked msb: %v", err)
	}
}

// TestProbeRealMSB runs the probe against the real pinned msb (the
// platform planted, since no host in CI boots a microVM): with msb's home
// empty it reports the image missing, so the real msb's version and its
// libkrunfw passed; once a one-layer image is loaded with `msb load` it is
// ready, and a pin of another digest reports the image missing again.
func TestProbeRealMSB(t *testing.T) {
	msb := testenv.MSB(t)
	h := newProbeHost(t)
	h.cfg.MSB = msb
	run := microsandbox.Exec{Path: msb, Home: h.cfg.Home}
	for _, f := range []string{"version", "image.json"} {
		if err := os.Remove(filepath.Join(h.cfg.Home, f)); err != nil {
			t.Fatal(err)
		}
	}
	if got := sandbox.ProbeCode(h.probe(oneSandbox)); got != microsandbox.ProbeImageMissing {
		t.Fatalf("empty msb home: probe code %q, want %q", got, microsandbox.ProbeImageMissing)
	}
	archive := filepath.Join(h.dir, "image.tar")
	writeImageArchive(t, archive)
	ctx := context.Background()
	if res, err := run.Run(ctx, microsandbox.Invocation{Args: []string{"load", "-i", archive, "-t", h.cfg.Image}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("msb load: %v, exit %d: %s", err, res.ExitCode, res.Stderr)
	}
	res, err := run.Run(ctx, microsandbox.Invocation{Args: []string{"image", "inspect", h.cfg.Image, "--format", "json"}})
	var img struct {
		Digest string `json:"digest"`
	}
	if err != nil || res.ExitCode != 0 || json.Unmarshal(res.Stdout, &img) != nil {
		t.Fatalf("msb image inspect: %v, exit %d: %s", err, res.ExitCode, res.Stderr)
	}
	if img.Digest == pinnedDigest {
		t.Fatalf("the loaded image has the planted digest %s", img.Digest)
	}
	if got := sandbox.ProbeCode(h.probe(oneSandbox)); got != microsandbox.ProbeImageMissing {
		t.Fatalf("loaded image of another digest: probe code %q, want %q", got, microsandbox.ProbeImageMissing)
	}
	h.cfg.ImageDigest = img.Digest
	if err := h.probe(oneSandbox); err != nil {
		t.Fatalf("pinned image loaded: %v", err)
	}
}

// writeImageArchive writes a one-layer image in the `docker save` format
// (manifest.json, the config and the layer as blobs), which `msb load`
// reads: one file, /hello.
func writeImageArchive(t *testing.T, path string) {
	t.Helper()
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	body := []byte("hello\n")
	if err := lw.WriteHeader(&tar.Header{Name: "hello", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := lw.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := lw.Close(); err != nil {
		t.Fatal(err)
	}
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	layerID := sum(layer.Bytes())
	config := []byte(`{"architecture":"amd64","os":"linux","config":{"User":"1000:1000"},"rootfs":{"type":"layers","diff_ids":["sha256:` + layerID + `"]}}`)
	configID := sum(config)
	manifest := []byte(`[{"Config":"blobs/sha256/` + configID + `","RepoTags":[],"Layers":["blobs/sha256/` + layerID + `"]}]`)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		data []byte
	}{{"manifest.json", manifest}, {"blobs/sha256/" + configID, config}, {"blobs/sha256/" + layerID, layer.Bytes()}} {
		if err := w.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
