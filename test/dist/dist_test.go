package dist

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth.dev/core/store/storetest"
	"berth.dev/nodeagent"
	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/testenv"
	"berth.dev/test/internal/stack"
)

// version is the release version the test builds (BERTH_VERSION).
const version = "0.0.1.disttest"

// A file of a package or archive: its mode as dpkg-deb or tar shows it.
type entry struct {
	mode  string // "-rwxr-xr-x"
	owner string // "root/root"
}

const (
	exe  = "-rwxr-xr-x"
	pub  = "-rw-r--r--"
	priv = "-rw-------"
)

func TestMain(m *testing.M) { stack.Main(m) }

// TestRelease runs make dist once and checks what it built.
func TestRelease(t *testing.T) {
	testenv.SkipShort(t, "make dist")
	if os.Geteuid() != 0 {
		testenv.Unavailable(t, "make dist needs root (the runtime image's file owners)")
	}
	for _, tool := range []string{"make", "dpkg-deb", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing: %v", tool, err)
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dist := filepath.Join(t.TempDir(), "dist")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	began := time.Now()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "-C", root, "dist", "DIST="+dist)
	cmd.Env = append(os.Environ(), "BERTH_VERSION="+version)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make dist: %v\n%s", err, out)
	}
	t.Logf("make dist took %s", time.Since(began).Round(100*time.Millisecond))

	r := &release{root: root, dist: dist}
	t.Run("SHA256SUMS", func(t *testing.T) {
		c := exec.Command("sha256sum", "--check", "--quiet", "SHA256SUMS")
		c.Dir = dist
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("sha256sum --check: %v\n%s", err, out)
		}
	})
	t.Run("CorePackage", r.corePackage)
	t.Run("NodeAgentPackage", r.nodeAgentPackage)
	t.Run("InstalledNodeAgentServes", r.installedNodeAgentServes)
	t.Run("RuntimeImage", r.runtimeImage)
	t.Run("MicrosandboxImage", r.microsandboxImage)
	t.Run("Archives", r.archives)
	t.Run("MaintainerScripts", r.maintainerScripts)
}

type release struct {
	root string // the checkout
	dist string // where make dist wrote
}

func (r *release) deb(name string) string {
	return filepath.Join(r.dist, name+"_"+version+"_amd64.deb")
}

func (r *release) corePackage(t *testing.T) {
	deb := r.deb("berth-core")
	r.checkPackage(t, deb, "berth-core", map[string]entry{
		"./usr/bin/berth-core":                    {exe, "root/root"},
		"./lib/systemd/system/berth-core.service": {pub, "root/root"},
		"./etc/berth/core.env":                    {priv, "root/root"},
		"./usr/share/doc/berth-core/README.md":    {pub, "root/root"},
	}, []string{"/etc/berth/core.env"})
	dir := r.extract(t, "berth-core")
	bin := filepath.Join(dir, "usr/bin/berth-core")
	checkStatic(t, bin)
	out := runOK(t, bin, "version")
	if !regexp.MustCompile(`^berth-core ` + regexp.QuoteMeta(version) + ` \(schema version [0-9]+\)\n$`).MatchString(out) {
		t.Errorf("berth-core version printed %q", out)
	}
	r.sameAsSource(t, dir, "lib/systemd/system/berth-core.service", "deploy/systemd/berth-core.service")
	r.sameAsSource(t, dir, "etc/berth/core.env", "deploy/examples/core.env")

	// The unit's ExecStart, expanded with the example settings as systemd
	// would, must get past berth-core's flag parsing: with the example's
	// empty database URL, serve stops at its first check (exit 2, "are
	// required") and touches nothing.
	unit := readUnit(t, filepath.Join(dir, "lib/systemd/system/berth-core.service"))
	env := unit.environment(t, dir)
	if _, ok := env["BERTH_DATABASE_URL"]; !ok {
		t.Error("the example core.env does not set BERTH_DATABASE_URL")
	}
	env["BERTH_PUBLIC_URL"] = "https://core.example:7780"
	args := unit.execStart(t, env)
	if args[0] != "/usr/bin/berth-core" || len(args) < 3 || args[1] != "serve" {
		t.Fatalf("ExecStart is %q", args)
	}
	if !slices.Contains(args, "--state-dir=/var/lib/berth-core") || unit.get("StateDirectory") != "berth-core" {
		t.Errorf("ExecStart %q and StateDirectory=%s disagree on /var/lib/berth-core", args, unit.get("StateDirectory"))
	}
	code, stderr := run(t, filepath.Join(dir, args[0]), args[1:]...)
	if code != 2 || !strings.Contains(stderr, "are required") || strings.Contains(stderr, "flag provided but not defined") {
		t.Errorf("berth-core %q: exit %d, stderr %q; want exit 2 at the database URL check, every flag accepted", args[1:], code, stderr)
	}
}

func (r *release) nodeAgentPackage(t *testing.T) {
	deb := r.deb("berth-nodeagent")
	r.checkPackage(t, deb, "berth-nodeagent", map[string]entry{
		"./usr/bin/berth-nodeagent":                                {exe, "root/root"},
		"./lib/systemd/system/berth-nodeagent.service":             {pub, "root/root"},
		"./etc/berth/nodeagent.json":                               {pub, "root/root"},
		"./usr/share/berth/runtime/seccomp.json":                   {pub, "root/root"},
		"./usr/share/berth/runtime/seccomp.LICENSE":                {pub, "root/root"},
		"./usr/share/berth/runtime/seccomp.json.sha256":            {pub, "root/root"},
		"./usr/share/berth/runtime/berth-runtime-image.tar":        {pub, "root/root"},
		"./usr/share/berth/runtime/berth-runtime-image.msb-digest": {pub, "root/root"},
		"./usr/share/doc/berth-nodeagent/README.md":                {pub, "root/root"},
	}, []string{"/etc/berth/nodeagent.json"})
	dir := r.extract(t, "berth-nodeagent")
	bin := filepath.Join(dir, "usr/bin/berth-nodeagent")
	checkStatic(t, bin)
	if out := runOK(t, bin, "version"); !strings.HasPrefix(out, "berth-nodeagent "+version+" (") {
		t.Errorf("berth-nodeagent version printed %q", out)
	}
	r.sameAsSource(t, dir, "lib/systemd/system/berth-nodeagent.service", "deploy/systemd/berth-nodeagent.service")
	r.sameAsSource(t, dir, "etc/berth/nodeagent.json", "deploy/examples/nodeagent.json")
	r.sameAsSource(t, dir, "usr/share/berth/runtime/seccomp.json", "deploy/runtime/seccomp.json")
	r.sameAsSource(t, dir, "usr/share/berth/runtime/seccomp.LICENSE", "deploy/runtime/seccomp.LICENSE")

	// The profile is the one the Docker adapter accepts.
	if _, err := docker.LoadSeccompProfile(filepath.Join(dir, "usr/share/berth/runtime/seccomp.json")); err != nil {
		t.Errorf("the packaged seccomp profile: %v", err)
	}
	image := readFile(t, filepath.Join(dir, "usr/share/berth/runtime/berth-runtime-image.tar"))
	if !bytes.Equal(image, readFile(t, filepath.Join(r.dist, "berth-runtime-image_"+version+"_amd64.tar"))) {
		t.Error("the packaged runtime image differs from dist's berth-runtime-image archive")
	}
	if !bytes.Equal(readFile(t, filepath.Join(dir, "usr/share/berth/runtime/berth-runtime-image.msb-digest")),
		readFile(t, filepath.Join(r.dist, "berth-runtime-image_"+version+"_amd64.msb-digest"))) {
		t.Error("the packaged msb digest differs from dist's .msb-digest file")
	}

	// The example configuration decodes with the agent's own decoder, its
	// node section with the Docker adapter's once the image id is filled
	// in, and it names the state directory of the unit and the packaged
	// seccomp profile.
	cfg, err := nodeagent.DecodeConfig(readFile(t, filepath.Join(dir, "etc/berth/nodeagent.json")))
	if err != nil {
		t.Fatalf("the example nodeagent.json: %v", err)
	}
	unit := readUnit(t, filepath.Join(dir, "lib/systemd/system/berth-nodeagent.service"))
	if cfg.StateDir != "/var/lib/"+unit.get("StateDirectory") {
		t.Errorf("nodeagent.json state_dir %s, unit StateDirectory=%s", cfg.StateDir, unit.get("StateDirectory"))
	}
	node := strings.Replace(string(cfg.Node), "sha256:REPLACE-WITH-THE-RUNTIME-IMAGE-ID", "sha256:"+strings.Repeat("0", 64), 1)
	nc, err := docker.DecodeNodeConfig([]byte(node))
	if err != nil {
		t.Fatalf("the example node section (image id filled in): %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, nc.SeccompProfile)); err != nil {
		t.Errorf("nodeagent.json's seccomp_profile %s is not in the package", nc.SeccompProfile)
	}

	// The unit's ExecStart reaches the agent's --config; the configuration
	// it names is replaced with a missing file, so the agent stops at
	// reading it and starts nothing on this host.
	env := unit.environment(t, dir)
	if env["BERTH_NODEAGENT_CONFIG"] != "/etc/berth/nodeagent.json" {
		t.Errorf("the unit's BERTH_NODEAGENT_CONFIG is %q", env["BERTH_NODEAGENT_CONFIG"])
	}
	env["BERTH_NODEAGENT_CONFIG"] = filepath.Join(t.TempDir(), "missing.json")
	args := unit.execStart(t, env)
	if args[0] != "/usr/bin/berth-nodeagent" {
		t.Fatalf("ExecStart is %q", args)
	}
	code, stderr := run(t, filepath.Join(dir, args[0]), args[1:]...)
	if code != 1 || !strings.Contains(stderr, "cannot read the configuration file") {
		t.Errorf("berth-nodeagent %q: exit %d, stderr %q; want exit 1 reading the configuration", args[1:], code, stderr)
	}
}

// installedNodeAgentServes runs the berth-nodeagent the package installs
// (extracted with dpkg-deb -x) against a real berth-core, PostgreSQL and
// Docker Engine: it enrolls with a token, serves, and becomes ready for
// the committed deployment.
func (r *release) installedNodeAgentServes(t *testing.T) {
	bin := filepath.Join(r.extract(t, "berth-nodeagent"), "usr/bin/berth-nodeagent")
	c := stack.StartCore(t, storetest.NewDatabase(t), stack.CoreStateDir(t), true)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth-core log:\n%s", c.Logs())
		}
	})
	cc, ctx := c.AdminClient(t)
	inst := stack.InstallationID(t, ctx, cc)
	n := stack.EnrollAndStart(t, c, ctx, cc, inst, stack.NodeOptions{
		Socket: strings.TrimPrefix(testenv.DockerHost(t), "unix://"), Image: testenv.RuntimeImage(t), Bin: bin,
	}, "")
	name := stack.EnableAll(t, ctx, cc)[0]
	stack.CommitDockerDeployment(t, ctx, cc, stack.DefaultSpecification())
	stack.WaitNode(t, ctx, adminv1.NewNodeServiceClient(cc), name, func(node *adminv1.Node) bool {
		return stack.Connected(node) && node.GetReadiness().GetReady() && node.GetReadiness().GetGeneration() == 1
	})
	if n.Cmd.Path != bin {
		t.Fatalf("the node ran %s, want the packaged %s", n.Cmd.Path, bin)
	}
}

// runtimeImage checks the runtime image archive: a docker load archive
// (and OCI layout) tagged with the version whose one layer holds the
// release's berth-runtime.
func (r *release) runtimeImage(t *testing.T) {
	files := tarFiles(t, bytes.NewReader(readFile(t, filepath.Join(r.dist, "berth-runtime-image_"+version+"_amd64.tar"))))
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"].data, &manifest); err != nil || len(manifest) != 1 || len(manifest[0].Layers) != 1 {
		t.Fatalf("manifest.json: %v %+v", err, manifest)
	}
	m := manifest[0]
	if want := []string{"berth-runtime:" + version}; !slices.Equal(m.RepoTags, want) {
		t.Errorf("RepoTags %q, want %q", m.RepoTags, want)
	}
	if _, ok := files["index.json"]; !ok {
		t.Error("no OCI index.json")
	}
	for _, blob := range []string{m.Config, m.Layers[0]} {
		sum := sha256.Sum256(files[blob].data)
		if "blobs/sha256/"+hex.EncodeToString(sum[:]) != blob {
			t.Errorf("blob %s does not hash to its name", blob)
		}
	}
	var config struct {
		Architecture, OS string
		Config           struct{ User string }
	}
	if err := json.Unmarshal(files[m.Config].data, &config); err != nil {
		t.Fatal(err)
	}
	if config.Architecture != "amd64" || config.OS != "linux" || config.Config.User != "1000:1000" {
		t.Errorf("image config %+v", config)
	}
	layer := tarFiles(t, bytes.NewReader(files[m.Layers[0]].data))
	runtime := layer["usr/local/bin/berth-runtime"]
	if !bytes.Equal(runtime.data, readFile(t, filepath.Join(r.dist, "bin/berth-runtime"))) {
		t.Error("the image's /usr/local/bin/berth-runtime is not dist's bin/berth-runtime")
	}
	// Built without grpc's x/net/trace, whose pages every sandbox would
	// hold resident (scripts/build-runtime-image).
	info, err := buildinfo.ReadFile(filepath.Join(r.dist, "bin/berth-runtime"))
	if err != nil {
		t.Fatalf("bin/berth-runtime build info: %v", err)
	}
	tags := ""
	for _, s := range info.Settings {
		if s.Key == "-tags" {
			tags = s.Value
		}
	}
	if tags != "grpcnotrace" {
		t.Errorf("bin/berth-runtime was built with tags %q, want grpcnotrace", tags)
	}
	for _, dir := range []string{"home/runtime", "environment/workspace", "workspace"} {
		if h := layer[dir].header; h == nil || h.Uid != 1000 || h.Gid != 1000 {
			t.Errorf("/%s is not owned by the Runtime's user 1000:1000", dir)
		}
	}
	bin := filepath.Join(r.dist, "bin/berth-runtime")
	checkStatic(t, bin)
	if out := runOK(t, bin, "version"); !strings.HasPrefix(out, "berth-runtime "+version+" (") {
		t.Errorf("berth-runtime version printed %q", out)
	}
}

// archives checks the release archive of each component.
func (r *release) archives(t *testing.T) {
	seccomp := map[string]entry{
		"runtime/seccomp.json":        {pub, "0/0"},
		"runtime/seccomp.LICENSE":     {pub, "0/0"},
		"runtime/seccomp.json.sha256": {pub, "0/0"},
	}
	for component, want := range map[string]map[string]entry{
		"core": {
			"bin/berth-core":             {exe, "0/0"},
			"systemd/berth-core.service": {pub, "0/0"},
			"examples/core.env":          {priv, "0/0"},
		},
		"nodeagent": {
			"bin/berth-nodeagent":             {exe, "0/0"},
			"systemd/berth-nodeagent.service": {pub, "0/0"},
			"examples/nodeagent.json":         {pub, "0/0"},
		},
		"runtime": {
			"bin/berth-runtime":                                    {exe, "0/0"},
			"berth-runtime-image_" + version + "_amd64.tar":        {pub, "0/0"},
			"berth-runtime-image_" + version + "_amd64.msb-digest": {pub, "0/0"},
			"e2b.Dockerfile":                                       {pub, "0/0"},
		},
	} {
		if component != "core" {
			maps.Copy(want, seccomp)
		}
		want["README.md"] = entry{pub, "0/0"}
		name := "berth-" + component + "_" + version
		f, err := os.Open(filepath.Join(r.dist, name+"_linux_amd64.tar.gz"))
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]entry{}
		for p, file := range tarFiles(t, zr) {
			rel, ok := strings.CutPrefix(p, name+"/")
			if !ok && p != name {
				t.Errorf("%s: %s is outside %s/", name, p, name)
			}
			if file.header.Typeflag != tar.TypeDir {
				got[rel] = entry{fs.FileMode(file.header.Mode).String(), file.owner()}
			}
			// The E2B template's build context: its definition as in
			// the checkout, beside the release's bin/berth-runtime.
			if rel == "e2b.Dockerfile" && !bytes.Equal(file.data, readFile(t, filepath.Join(r.root, "deploy/e2b/e2b.Dockerfile"))) {
				t.Errorf("%s: e2b.Dockerfile is not deploy/e2b/e2b.Dockerfile", name)
			}
		}
		f.Close()
		if !maps.Equal(got, want) {
			t.Errorf("%s_linux_amd64.tar.gz holds\n%v\nwant\n%v", name, got, want)
		}
	}
}

// maintainerScripts runs each package's postinst, prerm and postrm with
// stub commands (getent, groupadd, useradd, install, systemctl) that only
// log their arguments: a fresh install creates the user and group, an
// upgrade does not, removal disables the unit.
func (r *release) maintainerScripts(t *testing.T) {
	for _, pkg := range []string{"berth-core", "berth-nodeagent"} {
		t.Run(pkg, func(t *testing.T) {
			scripts := r.controlFiles(t, r.deb(pkg))
			dir := t.TempDir()
			stubs := filepath.Join(dir, "stubs")
			if err := os.Mkdir(stubs, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"getent", "groupadd", "useradd", "install", "systemctl"} {
				stub := "#!/bin/sh\necho \"" + name + " $*\" >>\"$STUB_LOG\"\n"
				if name == "getent" {
					stub += "exit $GETENT_STATUS\n"
				}
				if err := os.WriteFile(filepath.Join(stubs, name), []byte(stub), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			state := "/var/lib/" + pkg
			_, statErr := os.Stat(state)
			stateMissing := errors.Is(statErr, fs.ErrNotExist)

			// script runs a maintainer script and returns its output and
			// the stub commands it ran.
			script := func(name, getentStatus string, args ...string) (stdout string, calls []string) {
				t.Helper()
				path := filepath.Join(dir, name)
				if err := os.WriteFile(path, scripts["./"+name].data, 0o755); err != nil {
					t.Fatal(err)
				}
				log := filepath.Join(dir, "log")
				_ = os.Remove(log)
				c := exec.Command("/bin/sh", append([]string{path}, args...)...)
				c.Env = []string{"PATH=" + stubs + ":/usr/sbin:/usr/bin:/sbin:/bin", "STUB_LOG=" + log, "GETENT_STATUS=" + getentStatus}
				out, err := c.CombinedOutput()
				if err != nil {
					t.Fatalf("%s %q: %v\n%s", name, args, err, out)
				}
				data, err := os.ReadFile(log)
				if err != nil && !errors.Is(err, fs.ErrNotExist) {
					t.Fatal(err)
				}
				return string(out), strings.FieldsFunc(string(data), func(r rune) bool { return r == '\n' })
			}

			out, calls := script("postinst", "2", "configure")
			if !slices.Contains(calls, "groupadd --system "+pkg) || !slices.ContainsFunc(calls, func(c string) bool {
				return strings.HasPrefix(c, "useradd --system --gid "+pkg+" --home-dir "+state+" --no-create-home --shell /usr/sbin/nologin ") &&
					strings.HasSuffix(c, " "+pkg)
			}) {
				t.Errorf("fresh postinst ran %q; want groupadd --system and useradd --system", calls)
			}
			if mkdir := "install -d -o " + pkg + " -g " + pkg + " -m 0700 " + state; slices.Contains(calls, mkdir) != stateMissing {
				t.Errorf("fresh postinst ran %q; %s exists: %v", calls, state, !stateMissing)
			}
			if !strings.Contains(out, "systemctl enable --now "+pkg) {
				t.Errorf("fresh postinst said %q", out)
			}
			if pkg == "berth-nodeagent" && !strings.Contains(out, "there is no docker group") {
				t.Errorf("postinst without a docker group said %q", out)
			}

			out, calls = script("postinst", "0", "configure", "0.0.0.old")
			if slices.ContainsFunc(calls, func(c string) bool {
				return strings.HasPrefix(c, "groupadd") || strings.HasPrefix(c, "useradd")
			}) || !strings.Contains(out, "upgraded from 0.0.0.old") {
				t.Errorf("upgrade postinst ran %q and said %q", calls, out)
			}

			if _, calls = script("prerm", "0", "upgrade", "0.0.2"); len(calls) != 0 {
				t.Errorf("prerm upgrade ran %q", calls)
			}
			if _, calls = script("prerm", "0", "remove"); !slices.Contains(calls, "systemctl --no-reload disable "+pkg+".service") {
				t.Errorf("prerm remove ran %q", calls)
			}
			script("postrm", "0", "remove")
			script("postrm", "0", "purge")
		})
	}
}

// checkPackage checks a .deb's control fields, control files and the
// files it installs (dirs aside): exactly want, with their modes.
func (r *release) checkPackage(t *testing.T, deb, name string, want map[string]entry, conffiles []string) {
	t.Helper()
	fields := map[string]string{}
	for line := range strings.Lines(runOK(t, "dpkg-deb", "--field", deb)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ": "); ok && !strings.HasPrefix(line, " ") {
			fields[k] = v
		}
	}
	for k, v := range map[string]string{"Package": name, "Version": version, "Architecture": "amd64"} {
		if fields[k] != v {
			t.Errorf("%s: %s is %q, want %q", filepath.Base(deb), k, fields[k], v)
		}
	}
	info := runOK(t, "dpkg-deb", "--info", deb)
	control := r.controlFiles(t, deb)
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		f, ok := control["./"+s]
		if !ok || !strings.Contains(info, " "+s+" ") {
			t.Errorf("%s has no %s", filepath.Base(deb), s)
			continue
		}
		if f.header.Mode&0o111 == 0 || !bytes.HasPrefix(f.data, []byte("#!/bin/sh\n")) {
			t.Errorf("%s: %s is not an executable /bin/sh script", filepath.Base(deb), s)
		}
	}
	if got := strings.Fields(string(control["./conffiles"].data)); !slices.Equal(got, conffiles) {
		t.Errorf("%s: conffiles %q, want %q", filepath.Base(deb), got, conffiles)
	}
	got := map[string]entry{}
	for line := range strings.Lines(runOK(t, "dpkg-deb", "--contents", deb)) {
		f := strings.Fields(line)
		if len(f) != 6 {
			t.Fatalf("dpkg-deb --contents line %q", line)
		}
		if !strings.HasPrefix(f[0], "d") {
			got[f[5]] = entry{f[0], f[1]}
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("%s installs\n%v\nwant\n%v", filepath.Base(deb), got, want)
	}
}

// controlFiles returns the files of a .deb's control archive.
func (r *release) controlFiles(t *testing.T, deb string) map[string]tarFile {
	t.Helper()
	c := exec.Command("dpkg-deb", "--ctrl-tarfile", deb)
	out, err := c.Output()
	if err != nil {
		t.Fatalf("dpkg-deb --ctrl-tarfile %s: %v", deb, err)
	}
	files := tarFiles(t, bytes.NewReader(out))
	// tarFiles trims "./"; the control archive's names are compared with it.
	withDot := make(map[string]tarFile, len(files))
	for k, v := range files {
		withDot["./"+k] = v
	}
	return withDot
}

// extract unpacks a package with dpkg-deb -x (never dpkg -i) into a
// folder of its own.
func (r *release) extract(t *testing.T, pkg string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "root")
	runOK(t, "dpkg-deb", "-x", r.deb(pkg), dir)
	return dir
}

func (r *release) sameAsSource(t *testing.T, dir, installed, source string) {
	t.Helper()
	if !bytes.Equal(readFile(t, filepath.Join(dir, installed)), readFile(t, filepath.Join(r.root, source))) {
		t.Errorf("/%s differs from %s", installed, source)
	}
}

// unit is a systemd unit file's [Service] settings, in order.
type unit struct{ settings [][2]string }

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	var u unit
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(readFile(t, path)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: line %q", path, line)
			}
			u.settings = append(u.settings, [2]string{k, v})
		}
	}
	return u
}

// get returns the last value of a setting.
func (u unit) get(key string) string {
	v := ""
	for _, s := range u.settings {
		if s[0] == key {
			v = s[1]
		}
	}
	return v
}

// environment returns the unit's Environment= settings and the variables
// its EnvironmentFile= files set (read from the extracted package under
// dir; a missing file prefixed "-" is skipped, as systemd does). The files
// are read by sh, which the examples are written for as well.
func (u unit) environment(t *testing.T, dir string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, s := range u.settings {
		switch s[0] {
		case "Environment":
			k, v, _ := strings.Cut(s[1], "=")
			env[k] = v
		case "EnvironmentFile":
			path, optional := strings.CutPrefix(s[1], "-")
			path = filepath.Join(dir, path)
			if _, err := os.Stat(path); optional && errors.Is(err, fs.ErrNotExist) {
				continue
			}
			c := exec.Command("/bin/sh", "-c", `set -a; . "$1"; env -0`, "sh", path)
			c.Env = []string{"PATH=/usr/bin:/bin"}
			out, err := c.Output()
			if err != nil {
				t.Fatalf("sh reading %s: %v", path, err)
			}
			for kv := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
				k, v, _ := strings.Cut(kv, "=")
				if strings.HasPrefix(k, "BERTH_") {
					env[k] = v
				}
			}
		}
	}
	return env
}

// execStart expands ExecStart= as systemd does for our units: "${NAME}"
// within a word is replaced by the value, a word that is exactly "$NAME"
// becomes the value's space-separated words (none when it is empty).
func (u unit) execStart(t *testing.T, env map[string]string) []string {
	t.Helper()
	braced := regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
	var args []string
	for _, word := range strings.Fields(u.get("ExecStart")) {
		if name, ok := strings.CutPrefix(word, "$"); ok && !strings.HasPrefix(name, "{") {
			args = append(args, strings.Fields(env[name])...)
			continue
		}
		args = append(args, braced.ReplaceAllStringFunc(word, func(m string) string {
			return env[braced.FindStringSubmatch(m)[1]]
		}))
	}
	if len(args) == 0 {
		t.Fatal("the unit has no ExecStart")
	}
	return args
}

// checkStatic fails unless path is a static ELF executable: no program
// interpreter, no shared libraries.
func checkStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		t.Errorf("%s is for %s, not amd64", path, f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s is dynamically linked (%s)", path, p.Type)
		}
	}
}

type tarFile struct {
	header *tar.Header
	data   []byte
}

func (f tarFile) owner() string {
	return strconv.Itoa(f.header.Uid) + "/" + strconv.Itoa(f.header.Gid)
}

// tarFiles reads a tar archive: every entry by its name without "./" (and
// without a trailing "/" for folders); regular files with their bytes.
func tarFiles(t *testing.T, r io.Reader) map[string]tarFile {
	t.Helper()
	files := map[string]tarFile{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		if name == "" || name == "." {
			continue
		}
		f := tarFile{header: h}
		if h.Typeflag == tar.TypeReg {
			if f.data, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
		files[name] = f
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// run runs a command with an empty environment and returns its exit code
// and standard error.
func run(t *testing.T, name string, args ...string) (int, string) {
	t.Helper()
	c := exec.Command(name, args...)
	c.Env = []string{}
	var stderr bytes.Buffer
	c.Stderr = &stderr
	err := c.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), stderr.String()
	default:
		t.Fatalf("%s: %v", name, err)
		return 0, ""
	}
}

// runOK runs a command that must succeed and returns its standard output.
func runOK(t *testing.T, name string, args ...string) string {
	t.Helper()
	c := exec.Command(name, args...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		t.Fatalf("%s %q: %v\n%s", name, args, err, stderr.String())
	}
	return string(out)
}
