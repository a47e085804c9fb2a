package microsandbox

import (
	"path/filepath"
	"regexp"
	"strings"

	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/strictjson"
)

// NodeConfig is the node-local configuration of the microsandbox adapter,
// read from the node agent's configuration file ("node" section).
type NodeConfig struct {
	// MSB is the absolute path of the pinned msb executable; libkrunfw is
	// found beside it (../lib), as msb itself looks for it.
	MSB string `json:"msb"`
	// Home is msb's state directory (MSB_HOME), absolute. The node agent's
	// own state directory holds the workspaces; Home holds msb's database,
	// image cache and sandboxes.
	Home string `json:"home"`
	// Image is the local reference the Runtime image was loaded under
	// (`msb load -t <image>`), for example "berth-runtime:0.13.0".
	Image string `json:"image"`
	// ImageDigest pins Image: its manifest digest, "sha256:<64 hex>", as
	// `msb image inspect` reports it.
	ImageDigest string `json:"image_digest"`
	// Network is "none" (no network) or "public" (msb's public profile:
	// the internet, no private ranges).
	Network string `json:"network"`
}

var (
	digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	imagePattern  = regexp.MustCompile(`^[a-z0-9][a-z0-9._/-]{0,127}:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
)

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
	if !cleanAbs(c.MSB) {
		return errdefs.Invalid("node.msb", "must be a clean absolute path")
	}
	if !cleanAbs(c.Home) {
		return errdefs.Invalid("node.home", "must be a clean absolute path")
	}
	if !imagePattern.MatchString(c.Image) {
		return errdefs.Invalid("node.image", "must be the local name:tag the runtime image was loaded under")
	}
	if !digestPattern.MatchString(c.ImageDigest) {
		return errdefs.Invalid("node.image_digest", "must be a manifest digest sha256:<64 hex>")
	}
	if c.Network != "none" && c.Network != "public" {
		return errdefs.Invalid("node.network", "must be none or public")
	}
	return nil
}

func cleanAbs(p string) bool {
	return p != "" && filepath.IsAbs(p) && filepath.Clean(p) == p && !strings.ContainsRune(p, 0)
}
