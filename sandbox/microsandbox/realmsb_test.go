package microsandbox_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/microsandbox"
	"berth.dev/sandbox/testenv"
)

// msbEnv names the pinned msb that scripts/test-services installs.
const msbEnv = "BERTH_TEST_MSB"

// realMSB is the pinned msb of the test services, with a fresh MSB_HOME
// holding a minimal image loaded as the fixture's reference; it returns
// the msb path, the home and the image's manifest digest. No microVM
// boots on a host without hardware virtualization, but every msb call
// the adapter makes runs for real.
func realMSB(t *testing.T) (bin, home, digest string) {
	t.Helper()
	testenv.SkipShort(t, "the pinned msb ("+msbEnv+")")
	bin = os.Getenv(msbEnv)
	if bin == "" {
		testenv.Unavailable(t, msbEnv+" is not set (scripts/test-services up installs the pinned msb and writes it)")
		return "", "", ""
	}
	// msb's run directory holds unix sockets: keep the home's path short.
	home, err := os.MkdirTemp("", "msbh-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(home) })
	archive := filepath.Join(home, "image.tar")
	if err := os.WriteFile(archive, ociArchive(t), 0o600); err != nil {
		t.Fatal(err)
	}
	msb(t, bin, home, "load", "-i", archive, "-t", realImage)
	var img struct {
		Digest string `json:"digest"`
	}
	if err := json.Unmarshal([]byte(msb(t, bin, home, "image", "inspect", realImage, "--format", "json")), &img); err != nil {
		t.Fatal(err)
	}
	return bin, home, img.Digest
}

const realImage = "berth-runtime:msbtest"

// msb runs one msb call for the test's own setup and checks, and fails
// the test unless it exits 0.
func msb(t *testing.T, bin, home string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"MSB_HOME=" + home, "HOME=" + home, "PATH=/usr/bin:/bin", "NO_COLOR=1"}
	cmd.Dir = home
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("msb %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// msbMayFail runs one msb call whose exit code does not matter (a create
// that leaves its record though the boot fails).
func msbMayFail(t *testing.T, bin, home string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"MSB_HOME=" + home, "HOME=" + home, "PATH=/usr/bin:/bin", "NO_COLOR=1"}
	cmd.Dir = home
	_ = cmd.Run()
}

// ociArchive is a minimal OCI image layout (and docker-save manifest):
// one layer holding the directories the sandbox mounts over.
func ociArchive(t *testing.T) []byte {
	t.Helper()
	layer := tarOf(t, map[string][]byte{"workspace/": nil, "home/": nil, "environment/": nil})
	layerDigest := digestOf(layer)
	config := []byte(`{"architecture":"amd64","os":"linux","config":{"User":"1000:1000","WorkingDir":"/workspace"},` +
		`"rootfs":{"type":"layers","diff_ids":["` + layerDigest + `"]}}`)
	manifest := []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",` +
		`"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"` + digestOf(config) + `","size":` + itoa(len(config)) + `},` +
		`"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"` + layerDigest + `","size":` + itoa(len(layer)) + `}]}`)
	index := []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[` +
		`{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"` + digestOf(manifest) + `","size":` + itoa(len(manifest)) + `}]}`)
	blob := func(b []byte) string { return "blobs/sha256/" + strings.TrimPrefix(digestOf(b), "sha256:") }
	saveManifest := []byte(`[{"Config":"` + blob(config) + `","RepoTags":["` + realImage + `"],"Layers":["` + blob(layer) + `"]}]`)
	return tarOf(t, map[string][]byte{
		"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`), "index.json": index, "manifest.json": saveManifest,
		"blobs/": nil, "blobs/sha256/": nil,
		blob(layer): layer, blob(config): config, blob(manifest): manifest,
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// tarOf packs files (a name ending in "/" is a directory) in name order.
func tarOf(t *testing.T, files map[string][]byte) []byte {
	t.Helper()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		h := &tar.Header{Name: n, Mode: 0o644, ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Size: int64(len(files[n]))}
		if strings.HasSuffix(n, "/") {
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(files[n]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestRealMSBCreateAndKill is native evidence on a host where no microVM
// boots: Create makes the real msb record, fails at boot and returns the
// Reference with a settled stopped Info and a fixed error; a foreign
// sandbox under ref's name is refused with the absence receipt and left
// alone by Kill; Kill removes exactly ref's record and host directory, and
// `msb list` then shows nothing of ref.
func TestRealMSBCreateAndKill(t *testing.T) {
	bin, home, digest := realMSB(t)
	installation, stateDir := uuid.NewString(), t.TempDir()
	p := microsandbox.New(microsandbox.Exec{Path: bin, Home: home}, microsandbox.Options{
		InstallationID: installation,
		Config:         microsandbox.NodeConfig{MSB: bin, Home: home, Image: realImage, ImageDigest: digest, Network: "none"},
		Resources:      resources, StateDirectory: stateDir,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	ref, other := contracttest.NewReference(), contracttest.NewReference()
	// A foreign sandbox under other's name: another tenant's labels.
	msbMayFail(t, bin, home, "run", "--detach", "--name", p.Name(other), "--pull", "never", "-q",
		"--label", microsandbox.LabelInstallation+"="+installation, "--label", microsandbox.LabelTenant+"="+uuid.NewString(),
		realImage, "--", "/bin/true")
	// Its boot fails here too; the record stays.
	msb(t, bin, home, "inspect", p.Name(other), "--format", "json")

	info, err := p.Create(ctx, contracttest.CreateRequest(ref, resources))
	if err == nil {
		t.Log("this host booted the microVM; the boot-failure half of this test does not apply")
	} else if !errdefs.IsRuntimeNotRunning(err) || info.Reference != ref || !info.CreateSettled ||
		info.State != sandbox.StateStopped || info.ProviderID == "" || info.CheckFor(ref) != nil {
		t.Fatalf("Create = %+v, %v; want the settled stopped Reference and ErrRuntimeNotRunning", info, err)
	}
	if err != nil && (strings.Contains(err.Error(), home) || strings.Contains(err.Error(), "relay")) {
		t.Errorf("Create's error leaks msb's text: %v", err)
	}
	if info, err := p.Create(ctx, contracttest.CreateRequest(other, resources)); !errdefs.IsOwnership(err) || !info.IsAbsenceReceipt(other) {
		t.Fatalf("Create under a foreign name = %+v, %v", info, err)
	}

	for _, r := range []sandbox.Reference{ref, other} {
		if err := p.Kill(ctx, sandbox.KillRequest{Reference: r}); err != nil {
			t.Fatalf("Kill: %v", err)
		}
	}
	var left []struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal([]byte(msb(t, bin, home, "list", "--format", "json")), &left); err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].Name != p.Name(other) {
		t.Errorf("msb list after Kill = %+v, want only the foreign sandbox", left)
	}
	if _, err := p.GetInfo(ctx, ref); !errdefs.IsNotFound(err) {
		t.Errorf("GetInfo after Kill = %v, want ErrNotFound", err)
	}
	if _, err := os.Lstat(filepath.Join(stateDir, "microsandbox", p.Name(ref))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("host directory left: %v", err)
	}
}

// TestRealMSBNetworkRules: the real msb accepts the network argv of each
// configuration and records exactly the intended policy: default egress
// denied, one allow rule for Core's host and port (a name, an IPv4 or an
// IPv6 literal), DNS for a name, and the public profile when configured.
func TestRealMSBNetworkRules(t *testing.T) {
	bin, home, digest := realMSB(t)
	for _, tc := range []struct {
		network, coreURL, destination string
		port                          int
	}{
		{"none", "https://core.berth.test:8443", `{"domain":"core.berth.test"}`, 8443},
		{"public", "https://10.1.2.3", `{"cidr":"10.1.2.3/32"}`, 443},
		{"none", "http://[fd00::7]:8080", `{"cidr":"fd00::7/128"}`, 8080},
	} {
		t.Run(tc.network+"/"+tc.coreURL, func(t *testing.T) {
			p := microsandbox.New(microsandbox.Exec{Path: bin, Home: home}, microsandbox.Options{
				InstallationID: uuid.NewString(),
				Config:         microsandbox.NodeConfig{MSB: bin, Home: home, Image: realImage, ImageDigest: digest, Network: tc.network},
				Resources:      resources, StateDirectory: t.TempDir(),
			})
			ref := contracttest.NewReference()
			req := contracttest.CreateRequest(ref, resources)
			req.Bootstrap.CoreURL = tc.coreURL
			ctx := context.Background()
			if _, err := p.Create(ctx, req); err != nil && !errdefs.IsRuntimeNotRunning(err) {
				t.Fatalf("Create = %v; want success or, without virtualization, ErrRuntimeNotRunning", err)
			}
			defer func() {
				if err := p.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
					t.Errorf("Kill: %v", err)
				}
			}()
			var rec struct {
				Config struct {
					Network struct {
						Policy struct {
							DefaultEgress string `json:"default_egress"`
							Rules         []struct {
								Action      string          `json:"action"`
								Destination json.RawMessage `json:"destination"`
								Ports       []struct{ Start, End int }
							} `json:"rules"`
						} `json:"policy"`
					} `json:"network"`
				} `json:"config"`
			}
			out := msb(t, bin, home, "inspect", p.Name(ref), "--format", "json")
			if err := json.Unmarshal([]byte(out), &rec); err != nil {
				t.Fatal(err)
			}
			policy := rec.Config.Network.Policy
			found := false
			for _, r := range policy.Rules {
				if r.Action == "allow" && jsonEq(r.Destination, tc.destination) && len(r.Ports) == 1 &&
					r.Ports[0].Start == tc.port && r.Ports[0].End == tc.port {
					found = true
				}
			}
			if !found || policy.DefaultEgress != "deny" {
				t.Errorf("recorded policy lacks the allow rule for %s port %d (default egress %q):\n%s",
					tc.destination, tc.port, policy.DefaultEgress, out)
			}
		})
	}
}

func jsonEq(a json.RawMessage, b string) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}
