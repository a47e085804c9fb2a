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
