// Command provider-artifacts writes (-write) or checks the distribution
// projection of the provider registration table: every file each node
// adapter needs distributed (providers.ArtifactCatalog), at
// deploy/projections/provider-artifacts.json.
package main

import (
	"os"

	"berth.dev/core/internal/projection"
	"berth.dev/sandbox/providers"
)

func main() {
	os.Exit(projection.Main("provider-artifacts", "deploy/projections/provider-artifacts.json",
		providers.ArtifactCatalog, os.Args[1:], os.Stderr))
}
