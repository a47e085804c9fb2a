package microsandbox

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// The sandbox's fixed settings (the Docker adapter's, where msb has them).
const (
	RuntimeUser   = "1000:1000"
	WorkspacePath = "/workspace"
	// EnvironmentPath holds the environment directories, as in Docker.
	EnvironmentPath = "/environment"
	// Security is msb's in-guest security profile for every sandbox.
	Security = "restricted"
	// TmpfsSpec is /tmp: 128 MiB, as Docker's.
	TmpfsSpec = "/tmp:128M"
	mib       = 1 << 20
)

// RuntimeCommand is the Runtime's start command (the Docker adapter's).
func RuntimeCommand() []string {
	return []string{runtimebootstrap.BinaryPath, "connect", "--profile", "default", "--bootstrap-file", runtimebootstrap.Path}
}

// Create writes ref's host directories (the bootstrap file, the CA and
// the environment directories, host.go), then asks msb once to create
// and boot the sandbox with the Runtime as its background command, and
// reads the record back: ownership labels, the pinned image's manifest
// digest, CPU, memory and disk. It never reuses a sandbox or host
// directory and never retries or cleans up: a failure after msb was asked
// returns the Reference for owned cleanup by Kill.
func (p *Provider) Create(ctx context.Context, req sandbox.CreateRequest) (sandbox.Info, error) {
	if err := p.ops.Check(sandbox.OpCreate); err != nil {
		return sandbox.Info{}, err
	}
	if err := req.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	ref := req.Reference
	bootstrap, err := runtimebootstrap.Encode(req.Bootstrap)
	if err != nil {
		return sandbox.Info{}, errdefs.Invalid("bootstrap", "invalid runtime bootstrap file")
	}
	network, err := p.networkArgs(req.Bootstrap.CoreURL)
	if err != nil {
		return sandbox.Info{}, err
	}
	name := p.Name(ref)
	if _, err := p.dirsOf(name); err != nil {
		return sandbox.Info{}, err
	}
	defer p.startCreate(name)()
	release, err := p.hold(ctx, name)
	if err != nil {
		return sandbox.Info{}, fmt.Errorf("create: %w", err)
	}
	defer release()

	switch rec, err := p.inspect(ctx, name); {
	case err == nil && !p.owns(ref, rec.Config.Labels):
		// A foreign sandbox holds the name. Nothing was asked of msb, so
		// this attempt can make nothing: the absence receipt.
		return absent(ref), fmt.Errorf("create: %w", errdefs.ErrOwnership)
	case err == nil:
		return sandbox.Info{}, fmt.Errorf("create: %w", errdefs.ErrExists)
	case errdefs.IsNotFound(err):
	default:
		return sandbox.Info{}, fmt.Errorf("create: inspect: %w", errdefs.ErrComputeUnconfirmed)
	}
	dirs, err := p.prepareHost(name, bootstrap, req.CoreCA)
	if err != nil {
		// Nothing was asked of msb: the attempt is settled.
		return absent(ref), fmt.Errorf("create: %w", err)
	}

	partial := sandbox.Info{Reference: ref}
	res, err := p.msb.Run(ctx, Invocation{Args: p.runArgs(ref, name, req.Resources, dirs, network)})
	outcome := classify(res, err)
	if outcome == ranUnknown || outcome == ranNotRun {
		// Unknown, but settled now: the msb child has exited (Exec.Run
		// waits for it), and only that process inserts the record.
		return partial, fmt.Errorf("create: %w", errdefs.ErrComputeUnconfirmed)
	}
	return p.settle(ctx, ref, name, req.Resources, outcome)
}

// settle reads the record msb left after its create call exited by
// itself and reports it: running and as asked, or the reason it is not.
func (p *Provider) settle(ctx context.Context, ref sandbox.Reference, name string, res sandbox.Resources, outcome ran) (sandbox.Info, error) {
	partial := sandbox.Info{Reference: ref}
	rec, err := p.inspect(ctx, name)
	switch {
	case err == nil && !p.owns(ref, rec.Config.Labels):
		return partial, fmt.Errorf("create: %w", errdefs.ErrOwnership)
	case errdefs.IsNotFound(err) && outcome == ranFailed:
		// msb refused before it inserted anything, and its process is
		// gone, but this Create wrote the host directories, which only
		// Kill removes: an unknown outcome for the caller (as a node
		// answers it; the protocol has no settled refusal of a Create),
		// never a refusal that touched nothing.
		return partial, fmt.Errorf("create: msb refused the sandbox: %w", errdefs.ErrComputeUnconfirmed)
	case err != nil:
		return partial, fmt.Errorf("create: inspect created sandbox: %w", errdefs.ErrComputeUnconfirmed)
	}
	st, _ := state(rec.Status)
	settled := sandbox.Info{Reference: ref, ProviderID: name, State: st, CreateSettled: true}
	if !p.applied(rec, res) {
		return settled, fmt.Errorf("create: msb did not apply the configured limits or image: %w", errdefs.ErrInvalid)
	}
	if outcome != ranOK || st != sandbox.StateRunning {
		// The microVM did not boot (or exited at once): the record stays
		// for Kill.
		if st == sandbox.StateRunning {
			settled.State = sandbox.StateStopped
		}
		return settled, fmt.Errorf("create: the microVM is not running: %w", errdefs.ErrRuntimeNotRunning)
	}
	settled.BootstrapComplete = true
	return settled, nil
}

// absent is the creation-absence receipt of an attempt that asked msb
// nothing.
func absent(ref sandbox.Reference) sandbox.Info {
	return sandbox.Info{Reference: ref, State: sandbox.StateAbsent, CreateSettled: true}
}

// vcpus, memoryMiB and diskMiB convert the requested resources to msb's
// units, rounding up.
func vcpus(r sandbox.Resources) int64     { return (r.CPUMillis + 999) / 1000 }
func memoryMiB(r sandbox.Resources) int64 { return (r.MemoryBytes + mib - 1) / mib }
func diskMiB(r sandbox.Resources) int64   { return (r.DiskBytes + mib - 1) / mib }

// applied reports whether msb recorded the pinned image and the limits.
func (p *Provider) applied(rec record, r sandbox.Resources) bool {
	oci := rec.Config.Image.OCI
	return oci != nil && oci.Reference == p.opts.Config.Image && oci.RootDisk.SizeMiB == diskMiB(r) &&
		rec.Config.ManifestDigest == p.opts.Config.ImageDigest &&
		rec.Config.Resources.CPUs == vcpus(r) && rec.Config.Resources.MemoryMiB == memoryMiB(r)
}

// runArgs is the one create call: `msb run --detach`, which creates the
// named sandbox, boots it and starts the Runtime in the background.
func (p *Provider) runArgs(ref sandbox.Reference, name string, r sandbox.Resources, dirs hostDirs, network []string) []string {
	args := []string{"run", "--detach", "--name", name, "--pull", "never", "-q"}
	args = append(args, p.labelArgs(ref)...)
	args = append(args,
		"--cpus", strconv.FormatInt(vcpus(r), 10),
		"--memory", strconv.FormatInt(memoryMiB(r), 10)+"M",
		"--root-disk", strconv.FormatInt(diskMiB(r), 10)+"M",
		"--user", RuntimeUser, "--workdir", WorkspacePath, "--security", Security,
		"--tmpfs", TmpfsSpec,
		"--mount-dir", dirs.home+":"+homePath()+":uid=1000,gid=1000",
		"--mount-dir", dirs.environment+":"+EnvironmentPath+":uid=1000,gid=1000",
		"--mount-dir", dirs.workspace+":"+WorkspacePath+":uid=1000,gid=1000",
	)
	args = append(args, network...)
	args = append(args, p.opts.Config.Image, "--")
	return append(args, RuntimeCommand()...)
}

// networkArgs are the network rules: the configured profile (no network,
// or msb's public profile: the internet without private ranges) and one
// exact egress allow rule for Core's host and port, so the Runtime reaches
// Core wherever it is (msb denies private ranges by default). A name also
// needs DNS, which msb's gateway answers.
func (p *Provider) networkArgs(coreURL string) ([]string, error) {
	u, err := url.Parse(coreURL)
	if err != nil || u.Hostname() == "" {
		return nil, errdefs.Invalid("bootstrap.core_url", "must name a host")
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return nil, errdefs.Invalid("bootstrap.core_url", "must have a valid port")
	}
	args := []string{"--no-net"}
	if p.opts.Config.Network == "public" {
		args = []string{"--net", "public"}
	}
	var target string
	switch ip := net.ParseIP(host); {
	case ip != nil && ip.To4() == nil:
		target = "[" + host + "]"
	case ip != nil:
		target = host
	case strings.ContainsAny(host, ",:@[]= "):
		return nil, errdefs.Invalid("bootstrap.core_url", "host has a character msb rules cannot carry")
	default:
		target = "domain=" + host
		args = append(args, "--net-rule", "allow@dns")
	}
	return append(args, "--net-rule", "allow@"+target+":tcp:"+port), nil
}
