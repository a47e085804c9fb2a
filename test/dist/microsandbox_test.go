package dist

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"berth.dev/sandbox/microsandbox"
	"berth.dev/sandbox/testenv"
)

// MSBEnv names the real msb executable of the pinned release (libkrunfw
// beside it in ../lib), provided by scripts/test-services.
const MSBEnv = "BERTH_TEST_MSB"

// msbDigestPattern is what the .msb-digest file holds: one manifest
// digest and a newline.
var msbDigestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}\n$`)

// TestRuntimeImageForMicrosandbox builds the runtime image archive twice
// the way make dist does (scripts/build-runtime-image --output) and loads
// it into the real msb: the two builds are byte-identical, and the digest
// the script prints for the node section's image_digest is exactly the
// one `msb image inspect` reports for the loaded image, and the one this
// test recomputes from the archive on its own.
func TestRuntimeImageForMicrosandbox(t *testing.T) {
	testenv.SkipShort(t, "scripts/build-runtime-image and the real msb")
	if os.Geteuid() != 0 {
		testenv.Unavailable(t, "scripts/build-runtime-image needs root (the runtime image's file owners)")
	}
	msb := msbPath(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	const tag = "0.0.2.msbtest"
	dir := t.TempDir()
	build := func(name string) (archive []byte, printed map[string]string) {
		t.Helper()
		out := filepath.Join(dir, name)
		c := exec.Command(filepath.Join(root, "scripts/build-runtime-image"), "--output", out)
		c.Env = append(os.Environ(), "BERTH_RUNTIME_VERSION="+tag, "BERTH_RUNTIME_TAG="+tag)
		var stderr bytes.Buffer
		c.Stderr = &stderr
		stdout, err := c.Output()
		if err != nil {
			t.Fatalf("build-runtime-image: %v\n%s", err, stderr.String())
		}
		lines := strings.Split(strings.TrimSuffix(string(stdout), "\n"), "\n")
		if last := lines[len(lines)-1]; last != "BERTH_RUNTIME_IMAGE_ARCHIVE="+out {
			t.Errorf("the last line printed is %q; want BERTH_RUNTIME_IMAGE_ARCHIVE=%s", last, out)
		}
		printed = map[string]string{}
		for _, l := range lines {
			if k, v, ok := strings.Cut(l, "="); ok {
				printed[k] = v
			}
		}
		return readFile(t, out), printed
	}
	a, printed := build("a.tar")
	b, _ := build("b.tar")
	if !bytes.Equal(a, b) {
		t.Error("two builds of the runtime image archive differ")
	}
	want := printed["BERTH_RUNTIME_IMAGE_MSB_DIGEST"]
	if !msbDigestPattern.MatchString(want + "\n") {
		t.Fatalf("build-runtime-image printed no msb digest (BERTH_RUNTIME_IMAGE_MSB_DIGEST=%q)", want)
	}
	if got := msbManifestDigest(t, a); got != want {
		t.Errorf("the printed msb digest %s differs from the one recomputed from the archive, %s", want, got)
	}
	img := msbLoad(t, msb, filepath.Join(dir, "a.tar"), "berth-runtime:"+tag)
	if img.Digest != want {
		t.Errorf("msb reports the loaded image's digest %s; build-runtime-image printed %s", img.Digest, want)
	}
	if img.Config.User != "1000:1000" || img.Config.WorkingDir != "/workspace" || img.LayerCount != 1 {
		t.Errorf("msb image inspect: %+v", img)
	}
	// msb holds exactly the archive's config and layer.
	config, layers := archiveBlobs(t, a)
	if img.Config.Digest != config || len(img.Layers) != 1 || img.Layers[0].BlobDigest != layers[0] {
		t.Errorf("msb holds config %s and layers %+v; the archive has config %s and layers %q", img.Config.Digest, img.Layers, config, layers)
	}
	// Loaded without -t, the archive's own name is the reference.
	if named := msbLoad(t, msb, filepath.Join(dir, "b.tar"), ""); named.Digest != want || named.Reference != "berth-runtime:"+tag {
		t.Errorf("msb load without -t: %s as %q; want %s as berth-runtime:%s", named.Digest, named.Reference, want, tag)
	}
}

// msbPath returns the real msb (BERTH_TEST_MSB) after checking its
// version is the pinned one: the digest computation is msb's, of that
// release. Missing: a skip on a developer machine, a failure under CI.
func msbPath(t *testing.T) string {
	t.Helper()
	msb := os.Getenv(MSBEnv)
	if msb == "" {
		testenv.Unavailable(t, MSBEnv+" is not set: this test needs the real msb "+microsandbox.PinnedVersion+
			" (scripts/test-services up provides it; or export "+MSBEnv+"=/path/to/bin/msb)")
		return ""
	}
	out, err := exec.Command(msb, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", msb, err)
	}
	if got := strings.TrimSpace(string(out)); got != "msb "+microsandbox.PinnedVersion {
		t.Fatalf("%s is %q; want msb %s", msb, got, microsandbox.PinnedVersion)
	}
	return msb
}

// msbImage is what `msb image inspect --format json` reports.
type msbImage struct {
	Digest     string `json:"digest"`
	Reference  string `json:"reference"`
	LayerCount int    `json:"layer_count"`
	Config     struct {
		Digest     string `json:"digest"`
		User       string `json:"user"`
		WorkingDir string `json:"working_dir"`
	} `json:"config"`
	Layers []struct {
		BlobDigest string `json:"blob_digest"`
	} `json:"layers"`
}

// msbLoad loads archive into a fresh MSB_HOME with the real msb (under
// tag, or under the archive's own name when tag is empty) and returns
// what msb reports of the image it loaded.
func msbLoad(t *testing.T, msb, archive, tag string) msbImage {
	t.Helper()
	home := t.TempDir()
	run := func(args ...string) []byte {
		t.Helper()
		c := exec.Command(msb, args...)
		c.Env = []string{"MSB_HOME=" + home, "HOME=" + home, "PATH=/usr/bin:/bin", "NO_COLOR=1"}
		var stderr bytes.Buffer
		c.Stderr = &stderr
		out, err := c.Output()
		if err != nil {
			t.Fatalf("msb %q: %v\n%s", args, err, stderr.String())
		}
		return out
	}
	args := []string{"load", "-q", "-i", archive}
	if tag != "" {
		args = append(args, "-t", tag)
	}
	run(args...)
	var list []msbImage
	if err := json.Unmarshal(run("image", "list", "--format", "json"), &list); err != nil || len(list) != 1 {
		t.Fatalf("msb image list after the load: %v %+v", err, list)
	}
	var img msbImage
	if err := json.Unmarshal(run("image", "inspect", list[0].Reference, "--format", "json"), &img); err != nil {
		t.Fatalf("msb image inspect: %v", err)
	}
	return img
}

// archiveBlobs returns the digests of a docker-save archive's config and
// layers, computed from their bytes.
func archiveBlobs(t *testing.T, archive []byte) (config string, layers []string) {
	t.Helper()
	files := tarFiles(t, bytes.NewReader(archive))
	var manifest []struct {
		Config string
		Layers []string
	}
	if err := json.Unmarshal(files["manifest.json"].data, &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v %+v", err, manifest)
	}
	digest := func(name string) string {
		sum := sha256.Sum256(files[name].data)
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	for _, l := range manifest[0].Layers {
		layers = append(layers, digest(l))
	}
	return digest(manifest[0].Config), layers
}

// msbManifestDigest recomputes, from a docker-save archive, the manifest
// digest msb gives the image when it loads it: msb (0.6.18) takes the
// archive's manifest.json, writes the OCI image manifest of its config
// and layers itself (JSON keys sorted, no spaces, the layer's media type
// from its compression) and names the image by that manifest's sha256.
func msbManifestDigest(t *testing.T, archive []byte) string {
	t.Helper()
	files := tarFiles(t, bytes.NewReader(archive))
	var manifest []struct {
		Config string
		Layers []string
	}
	if err := json.Unmarshal(files["manifest.json"].data, &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v %+v", err, manifest)
	}
	digest := func(b []byte) string {
		sum := sha256.Sum256(b)
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	config := files[manifest[0].Config].data
	layers := []map[string]any{}
	for _, name := range manifest[0].Layers {
		data := files[name].data
		mediaType := "application/vnd.oci.image.layer.v1.tar"
		switch {
		case bytes.HasPrefix(data, []byte{0x1f, 0x8b}):
			mediaType += "+gzip"
		case bytes.HasPrefix(data, []byte{0x28, 0xb5, 0x2f, 0xfd}):
			mediaType += "+zstd"
		}
		layers = append(layers, map[string]any{"digest": digest(data), "mediaType": mediaType, "size": len(data)})
	}
	// encoding/json writes map keys sorted and no spaces, as msb does.
	m, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        map[string]any{"digest": digest(config), "mediaType": "application/vnd.oci.image.config.v1+json", "size": len(config)},
		"layers":        layers,
	})
	if err != nil {
		t.Fatal(err)
	}
	return digest(m)
}

// microsandboxImage checks the pin make dist writes beside the runtime
// image archive: berth-runtime-image_<v>_amd64.msb-digest holds the digest
// msb gives the archive when it loads it (recomputed here; and reported by
// the real msb, BERTH_TEST_MSB).
func (r *release) microsandboxImage(t *testing.T) {
	archive := filepath.Join(r.dist, "berth-runtime-image_"+version+"_amd64.tar")
	pin := string(readFile(t, filepath.Join(r.dist, "berth-runtime-image_"+version+"_amd64.msb-digest")))
	if !msbDigestPattern.MatchString(pin) {
		t.Fatalf("the .msb-digest file holds %q; want sha256:<64 hex> and a newline", pin)
	}
	pin = strings.TrimSpace(pin)
	if got := msbManifestDigest(t, readFile(t, archive)); got != pin {
		t.Errorf("the .msb-digest file holds %s; the archive's msb digest is %s", pin, got)
	}
	sums := strings.Fields(string(readFile(t, filepath.Join(r.dist, "SHA256SUMS"))))
	if !slices.Contains(sums, "berth-runtime-image_"+version+"_amd64.msb-digest") {
		t.Error("SHA256SUMS does not list the .msb-digest file")
	}
	if img := msbLoad(t, msbPath(t), archive, "berth-runtime:"+version); img.Digest != pin {
		t.Errorf("msb reports the loaded image's digest %s; the .msb-digest file holds %s", img.Digest, pin)
	}
}
