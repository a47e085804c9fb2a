package services

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"berth.dev/sandbox/testenv"
)

const (
	// smokeImage is imported offline from Debian's static busybox.
	smokeImage = "berth-test/busybox:smoke"
	// busyboxPath is installed by Debian's busybox-static package.
	busyboxPath = "/bin/busybox"
	labelKey    = "io.berth.test"
	labelValue  = "smoke"
	// minAPIVersion is the first Docker Engine API with volume subpath mounts.
	minAPIVersion = "1.45"
)

func newDockerClient(t *testing.T) *client.Client {
	t.Helper()
	host := testenv.DockerHost(t)
	// API version negotiation is the client's default; the host comes only
	// from testenv, never from DOCKER_HOST.
	cli, err := client.New(client.WithHost(host))
	if err != nil {
		t.Fatalf("docker client for %s: %v", host, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func TestDockerEngineAPIVersion(t *testing.T) {
	cli := newDockerClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	v, err := cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		t.Fatalf("GET /version: %v", err)
	}
	t.Logf("engine %s, API %s (min %s), %s/%s", v.Version, v.APIVersion, v.MinAPIVersion, v.Os, v.Arch)
	if !versionAtLeast(t, v.APIVersion, minAPIVersion) {
		t.Fatalf("engine API version %s < %s: volume subpath mounts are not supported", v.APIVersion, minAPIVersion)
	}
}

// TestDockerVolumeSubpath imports a busybox image offline, writes a file into
// a named volume's workspace/ directory from one container, and reads it from
// a second container that mounts only that subpath.
func TestDockerVolumeSubpath(t *testing.T) {
	cli := newDockerClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	importBusybox(ctx, t, cli)

	suffix := randomSuffix(t)
	labels := map[string]string{labelKey: labelValue}

	vol, err := cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: "berth-smoke-" + suffix, Labels: labels})
	if err != nil {
		t.Fatalf("create volume: %v", err)
	}
	volName := vol.Volume.Name
	// Registered before the containers' cleanups, so it runs after them.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := cli.VolumeRemove(ctx, volName, client.VolumeRemoveOptions{Force: true}); err != nil {
			t.Errorf("remove volume %s: %v", volName, err)
		}
	})

	// Environment variables travel as JSON: valid UTF-8 without NUL bytes.
	payload := "berth smoke " + suffix + "\n\ttab, ünïcode ✓\n"

	writer := runContainer(ctx, t, cli, "berth-smoke-writer-"+suffix,
		&container.Config{
			Image:  smokeImage,
			Cmd:    []string{"/bin/sh", "-c", `mkdir -p /vol/workspace && printf '%s' "$PAYLOAD" > /vol/workspace/hello.txt`},
			Env:    []string{"PAYLOAD=" + payload},
			Labels: labels,
		},
		[]mount.Mount{{Type: mount.TypeVolume, Source: volName, Target: "/vol"}},
	)
	if writer.exitCode != 0 {
		t.Fatalf("writer exited %d: stdout %q stderr %q", writer.exitCode, writer.stdout, writer.stderr)
	}

	reader := runContainer(ctx, t, cli, "berth-smoke-reader-"+suffix,
		&container.Config{
			Image:  smokeImage,
			Cmd:    []string{"/bin/sh", "-c", `cat /workspace/hello.txt && if [ -e /workspace/workspace ]; then echo "subpath not applied" >&2; exit 3; fi`},
			Labels: labels,
		},
		[]mount.Mount{{
			Type:          mount.TypeVolume,
			Source:        volName,
			Target:        "/workspace",
			VolumeOptions: &mount.VolumeOptions{Subpath: "workspace"},
		}},
	)
	if reader.exitCode != 0 {
		t.Fatalf("reader exited %d: stdout %q stderr %q", reader.exitCode, reader.stdout, reader.stderr)
	}
	if reader.stdout != payload {
		t.Fatalf("read %q through the subpath mount, want %q", reader.stdout, payload)
	}
}

type runResult struct {
	exitCode       int64
	stdout, stderr string
}

// runContainer creates a container without network, runs it to completion
// and returns its exit code and output. The container is removed by
// t.Cleanup.
func runContainer(ctx context.Context, t *testing.T, cli *client.Client, name string, cfg *container.Config, mounts []mount.Mount) runResult {
	t.Helper()
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:   name,
		Config: cfg,
		HostConfig: &container.HostConfig{
			NetworkMode: "none",
			Mounts:      mounts,
		},
	})
	if err != nil {
		t.Fatalf("create container %s: %v", name, err)
	}
	id := created.ID
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			t.Errorf("remove container %s: %v", name, err)
		}
	})

	wait := cli.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("start container %s: %v", name, err)
	}
	var res runResult
	select {
	case r := <-wait.Result:
		if r.Error != nil {
			t.Fatalf("wait for container %s: %s", name, r.Error.Message)
		}
		res.exitCode = r.StatusCode
	case err := <-wait.Error:
		t.Fatalf("wait for container %s: %v", name, err)
	}

	logs, err := cli.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatalf("logs of container %s: %v", name, err)
	}
	defer logs.Close()
	var stdout, stderr bytes.Buffer
	if _, err := stdcopy.StdCopy(&stdout, &stderr, logs); err != nil {
		t.Fatalf("read logs of container %s: %v", name, err)
	}
	res.stdout, res.stderr = stdout.String(), stderr.String()
	return res
}

// importBusybox imports a root filesystem holding only Debian's static
// busybox (and applet links) as smokeImage, through the image import API: no
// registry is needed. An image already imported is reused (each import makes
// a new image ID and would leave the previous one dangling).
func importBusybox(ctx context.Context, t *testing.T, cli *client.Client) {
	t.Helper()
	have, err := cli.ImageList(ctx, client.ImageListOptions{
		Filters: make(client.Filters).Add("reference", smokeImage).Add("label", labelKey+"="+labelValue),
	})
	if err != nil {
		t.Fatalf("list images: %v", err)
	}
	if len(have.Items) > 0 {
		return
	}
	rootfs, err := busyboxRootfs()
	if err != nil {
		t.Fatalf("build busybox root filesystem (apt-get install busybox-static): %v", err)
	}
	res, err := cli.ImageImport(ctx,
		client.ImageImportSource{Source: bytes.NewReader(rootfs), SourceName: "-"},
		smokeImage,
		client.ImageImportOptions{
			Message: "berth smoke test image",
			Changes: []string{"LABEL " + labelKey + "=" + labelValue, `CMD ["/bin/sh"]`},
		})
	if err != nil {
		t.Fatalf("import %s: %v", smokeImage, err)
	}
	defer res.Close()
	out, err := io.ReadAll(res)
	if err != nil {
		t.Fatalf("import %s: %v", smokeImage, err)
	}
	if bytes.Contains(out, []byte(`"error"`)) || bytes.Contains(out, []byte(`"errorDetail"`)) {
		t.Fatalf("import %s: %s", smokeImage, out)
	}
}

// busyboxRootfs returns a tar stream of a minimal root filesystem: /bin/busybox
// and links for the applets the tests use.
func busyboxRootfs() ([]byte, error) {
	bin, err := os.ReadFile(busyboxPath)
	if err != nil {
		return nil, err
	}
	// A fixed time keeps the layer's digest stable across runs.
	mtime := time.Unix(0, 0)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, dir := range []string{"bin/", "tmp/", "etc/", "dev/", "proc/", "sys/"} {
		mode := int64(0o755)
		if dir == "tmp/" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: mode, ModTime: mtime}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(bin)), ModTime: mtime}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	for _, applet := range []string{"sh", "cat", "echo", "ls", "mkdir", "printf", "sleep", "test", "true", "false"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + applet, Linkname: "busybox", Mode: 0o777, ModTime: mtime}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func randomSuffix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// versionAtLeast compares dotted API versions such as "1.45".
func versionAtLeast(t *testing.T, got, want string) bool {
	t.Helper()
	g, w := parseVersion(t, got), parseVersion(t, want)
	for i := 0; i < max(len(g), len(w)); i++ {
		var a, b int
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return a > b
		}
	}
	return true
}

func parseVersion(t *testing.T, v string) []int {
	t.Helper()
	var out []int
	for _, part := range strings.Split(v, ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			t.Fatalf("bad version %q: %v", v, err)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		t.Fatalf("empty version")
	}
	return out
}
