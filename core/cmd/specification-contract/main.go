// Command specification-contract writes (-write) or checks the installer's
// projection of the provider registration table: the shared bounds of a
// deployment specification and each provider kind's policies
// (providers.SpecificationContract), at deploy/projections/specification-contract.json.
package main

import (
	"os"

	"berth.dev/core/internal/projection"
	"berth.dev/sandbox/providers"
)

func main() {
	os.Exit(projection.Main("specification-contract", "deploy/projections/specification-contract.json",
		providers.SpecificationContract, os.Args[1:], os.Stderr))
}
