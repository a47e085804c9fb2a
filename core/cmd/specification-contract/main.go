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
