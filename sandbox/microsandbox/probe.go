package microsandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"berth.dev/sandbox"
)

// The probe's diagnostic codes, in the order the probe checks them
// (platform, then capacity, then artifacts, then the pinned image).
const (
	ProbeNoKVM            = "kvm_device_missing"
	ProbeNoVirtualization = "hardware_virtualization_unavailable"
	ProbeCapacity         = "host_capacity_insufficient"
	ProbeMSBMissing       = "msb_missing"
	ProbeMSBVersion       = "msb_version_mismatch"
	ProbeLibkrunfwMissing = "libkrunfw_missing"
	ProbeImageMissing     = "image_missing"
)

// ProbeHomeUnusable is the build's diagnostic when msb's home cannot be
// created or its backend id cannot be read or written (a node agent
// without write access to it, or a file in its place), and the probe's
// when the home is gone and msb cannot run in it.
const ProbeHomeUnusable = "msb_home_unusable"

// HostPaths are the host files the probe reads to judge the platform. They
// are not node configuration: a node always probes its own host
// (DefaultHostPaths); tests plant their own.
type HostPaths struct {
	// KVM is the KVM device, which must be a character device the node
	// agent can open read-write.
	KVM string
	// CPUInfo is the kernel's CPU table (processors and their flags).
	CPUInfo string
	// MemInfo is the kernel's memory table (MemTotal).
	MemInfo string
}

// DefaultHostPaths are the real host's files.
var DefaultHostPaths = HostPaths{KVM: "/dev/kvm", CPUInfo: "/proc/cpuinfo", MemInfo: "/proc/meminfo"}

// maxHostTable bounds what the probe reads of a kernel table (a 512-CPU
// /proc/cpuinfo is about 1 MiB).
const maxHostTable = 8 << 20

// withDefaults fills the zero fields from DefaultHostPaths.
func (h HostPaths) withDefaults() HostPaths {
	if h.KVM == "" {
		h.KVM = DefaultHostPaths.KVM
	}
	if h.CPUInfo == "" {
		h.CPUInfo = DefaultHostPaths.CPUInfo
	}
	if h.MemInfo == "" {
		h.MemInfo = DefaultHostPaths.MemInfo
	}
	return h
}

// Probe checks native readiness in the guide's order: the platform (the
// KVM device is usable, the CPUs have hardware virtualization), the
// host's capacity for one sandbox of the deployment's Resources, the
// artifacts (msb is the pinned version, libkrunfw is beside it), then the
// pinned image (loaded under Image with exactly ImageDigest). Each failure
// is a sandbox.ProbeError with a fixed code; msb's text never leaves it.
// The probe only reads: it opens the KVM device and closes it, and runs
// `msb --version` and `msb image inspect`.
func (p *Provider) Probe(ctx context.Context) error {
	host := p.opts.Host.withDefaults()
	if !kvmUsable(host.KVM) {
		return &sandbox.ProbeError{Code: ProbeNoKVM}
	}
	cpus, virt, err := readCPUs(host.CPUInfo)
	if err != nil || !virt {
		return &sandbox.ProbeError{Code: ProbeNoVirtualization}
	}
	mem, err := readMemTotal(host.MemInfo)
	res := p.opts.Resources
	if err != nil || int64(cpus)*1000 < res.CPUMillis || mem < res.MemoryBytes {
		return &sandbox.ProbeError{Code: ProbeCapacity}
	}
	if err := p.probeArtifacts(ctx); err != nil {
		return err
	}
	return p.probeImage(ctx)
}

// kvmUsable reports whether path is a character device the process can
// open read-write (what msb needs of /dev/kvm).
func kvmUsable(path string) bool {
	fi, err := os.Stat(path)
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	_ = f.Close()
	return true
}

// readCPUs counts the processors of a /proc/cpuinfo table and reports
// whether any has the vmx (Intel VT-x) or svm (AMD-V) flag, the check msb
// itself makes.
func readCPUs(path string) (count int, virt bool, err error) {
	data, err := readBounded(path)
	if err != nil {
		return 0, false, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(key) {
		case "processor":
			count++
		case "flags":
			for _, f := range strings.Fields(value) {
				virt = virt || f == "vmx" || f == "svm"
			}
		}
	}
	return count, virt, sc.Err()
}

// readMemTotal returns MemTotal of a /proc/meminfo table in bytes.
func readMemTotal(path string) (int64, error) {
	data, err := readBounded(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		rest, ok := strings.CutPrefix(line, "MemTotal:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			break
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 || kb > 1<<50 {
			break
		}
		return kb << 10, nil
	}
	return 0, os.ErrInvalid
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxHostTable))
}

// probeArtifacts checks that the configured msb is an executable file
// that reports exactly the pinned version, and that the pinned libkrunfw
// is where msb looks for it: ../lib beside the resolved executable.
func (p *Provider) probeArtifacts(ctx context.Context) error {
	msb, err := filepath.EvalSymlinks(p.opts.Config.MSB)
	if err != nil {
		return &sandbox.ProbeError{Code: ProbeMSBMissing}
	}
	if fi, err := os.Stat(msb); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return &sandbox.ProbeError{Code: ProbeMSBMissing}
	}
	out, err := p.msb.Run(ctx, Invocation{Args: []string{"--version"}})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		// msb runs in its home: one removed after the build is the
		// reason, not msb.
		if fi, serr := os.Stat(p.opts.Config.Home); serr != nil || !fi.IsDir() {
			return &sandbox.ProbeError{Code: ProbeHomeUnusable}
		}
		return &sandbox.ProbeError{Code: ProbeMSBMissing}
	}
	if out.ExitCode != 0 || strings.TrimSpace(string(out.Stdout)) != "msb "+PinnedVersion {
		return &sandbox.ProbeError{Code: ProbeMSBVersion}
	}
	lib := filepath.Join(filepath.Dir(filepath.Dir(msb)), "lib", PinnedLibkrunfw)
	if fi, err := os.Stat(lib); err != nil || !fi.Mode().IsRegular() {
		return &sandbox.ProbeError{Code: ProbeLibkrunfwMissing}
	}
	return nil
}

// probeImage checks that msb holds the image under the configured local
// reference with exactly the pinned manifest digest (msb cannot create
// from a digest reference, so the pin is checked on the tag's record).
func (p *Provider) probeImage(ctx context.Context) error {
	out, err := p.msb.Run(ctx, Invocation{Args: []string{"image", "inspect", p.opts.Config.Image, "--format", "json"}})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil || out.ExitCode != 0 || out.Truncated {
		return &sandbox.ProbeError{Code: ProbeImageMissing}
	}
	var img struct {
		Digest string `json:"digest"`
	}
	if json.Unmarshal(out.Stdout, &img) != nil || img.Digest != p.opts.Config.ImageDigest {
		return &sandbox.ProbeError{Code: ProbeImageMissing}
	}
	return nil
}
