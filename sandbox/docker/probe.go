package docker

import (
	"context"
	"strconv"
	"strings"

	"github.com/moby/moby/client"

	"berth.dev/sandbox"
)

// MinAPIVersion is the oldest Docker Engine API that supports volume
// subpath mounts, which the adapter requires.
const MinAPIVersion = "1.45"

// The probe's diagnostic codes, in the order the probe checks them.
const (
	ProbeEngineUnreachable  = "engine_unreachable"
	ProbeEngineNoLimits     = "engine_no_resource_limits"
	ProbeEngineNoSubpath    = "engine_no_subpath_mounts"
	ProbeCapacity           = "host_capacity_insufficient"
	ProbeImageMissing       = "image_missing"
	ProbeImageUnsupportedOS = "image_not_linux"
)

// Probe checks native readiness in order: the engine answers, it enforces
// CPU and memory limits, it supports volume subpath mounts, the host has
// capacity for one sandbox, and the pinned image is present. Each failure
// is a sandbox.ProbeError with a fixed code.
func (p *Provider) Probe(ctx context.Context) error {
	ver, err := p.cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return &sandbox.ProbeError{Code: ProbeEngineUnreachable}
	}
	info, err := p.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return &sandbox.ProbeError{Code: ProbeEngineUnreachable}
	}
	if !info.Info.MemoryLimit || !info.Info.CPUCfsQuota || !info.Info.PidsLimit {
		return &sandbox.ProbeError{Code: ProbeEngineNoLimits}
	}
	if !APIAtLeast(ver.APIVersion, MinAPIVersion) {
		return &sandbox.ProbeError{Code: ProbeEngineNoSubpath}
	}
	res := p.opts.Resources
	if int64(info.Info.NCPU)*1000 < res.CPUMillis || info.Info.MemTotal < res.MemoryBytes {
		return &sandbox.ProbeError{Code: ProbeCapacity}
	}
	img, err := p.cli.ImageInspect(ctx, p.opts.Config.Image)
	if err != nil || img.ID != p.opts.Config.Image {
		return &sandbox.ProbeError{Code: ProbeImageMissing}
	}
	if img.Os != "" && img.Os != "linux" {
		return &sandbox.ProbeError{Code: ProbeImageUnsupportedOS}
	}
	return nil
}

// APIAtLeast compares dotted API versions ("1.45" >= "1.45").
func APIAtLeast(have, want string) bool {
	h, w := strings.Split(have, "."), strings.Split(want, ".")
	for i := range max(len(h), len(w)) {
		var hv, wv int
		if i < len(h) {
			v, err := strconv.Atoi(h[i])
			if err != nil {
				return false
			}
			hv = v
		}
		if i < len(w) {
			wv, _ = strconv.Atoi(w[i])
		}
		if hv != wv {
			return hv > wv
		}
	}
	return true
}
