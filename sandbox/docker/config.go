package docker

import (
	"net"
	"path/filepath"
	"regexp"
	"strings"

	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/strictjson"
)

// NodeConfig is the node-local configuration of the Docker adapter, read
// from the node agent's configuration file.
type NodeConfig struct {
	// Socket is the Docker Engine's Unix socket (absolute path).
	Socket string `json:"socket"`
	// Image is the pinned Runtime image id ("sha256:<64 hex>").
	Image string `json:"image"`
	// Network is the container network: "none", "bridge" or a user network
	// name; never "host" or "container:<id>".
	Network string `json:"network"`
	// ExtraHosts are "name:address" entries (address may be "host-gateway").
	ExtraHosts []string `json:"extra_hosts,omitempty"`
	// SeccompProfile is the path of the shipped runtime/seccomp.json.
	SeccompProfile string `json:"seccomp_profile"`
	// NestedSandbox lifts Docker's /proc masks (keeping /sys/firmware and
	// /sys/devices/virtual/powercap masked) and runs an init process.
	NestedSandbox bool `json:"nested_sandbox,omitempty"`
}

var (
	imageIDPattern  = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	networkPattern  = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}$`)
	hostnamePattern = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9.-]{0,251}[a-zA-Z0-9])?$`)
)

// MaxExtraHosts bounds NodeConfig.ExtraHosts.
const MaxExtraHosts = 32

// DecodeNodeConfig strictly decodes and validates a node configuration:
// unknown fields, trailing data and case-aliased keys are rejected. Errors
// name the field, never its value.
func DecodeNodeConfig(raw []byte) (NodeConfig, error) {
	var cfg NodeConfig
	if err := strictjson.Decode(raw, &cfg, 64<<10); err != nil {
		return NodeConfig{}, errdefs.Invalid("node", err.Error())
	}
	return cfg, cfg.Validate()
}

// Validate checks every field.
func (c NodeConfig) Validate() error {
	if !cleanAbs(c.Socket) {
		return errdefs.Invalid("node.socket", "must be a clean absolute path")
	}
	if !imageIDPattern.MatchString(c.Image) {
		return errdefs.Invalid("node.image", "must be a pinned image id sha256:<64 hex>")
	}
	switch {
	case c.Network == "host" || strings.HasPrefix(c.Network, "container:"):
		return errdefs.Invalid("node.network", "host and container networks are not allowed")
	case !networkPattern.MatchString(c.Network):
		return errdefs.Invalid("node.network", "must be none, bridge or a network name")
	}
	if len(c.ExtraHosts) > MaxExtraHosts {
		return errdefs.Invalid("node.extra_hosts", "too many entries")
	}
	for _, h := range c.ExtraHosts {
		name, addr, ok := strings.Cut(h, ":")
		if !ok || !hostnamePattern.MatchString(name) || (addr != "host-gateway" && net.ParseIP(addr) == nil) {
			return errdefs.Invalid("node.extra_hosts", "entries must be name:address")
		}
	}
	if !cleanAbs(c.SeccompProfile) {
		return errdefs.Invalid("node.seccomp_profile", "must be a clean absolute path")
	}
	return nil
}

func cleanAbs(p string) bool {
	return p != "" && filepath.IsAbs(p) && filepath.Clean(p) == p && !strings.ContainsRune(p, 0)
}
