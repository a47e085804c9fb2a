package nodeproto

import (
	"os"
	"testing"

	"berth.dev/sandbox/providercontract"

	"berth.dev/core/store/storetest"
)

func benchSamples() string { return os.Getenv("BERTH_BENCH_SAMPLES") }

func providercontractOp(name string) providercontract.Operation {
	return providercontract.Operation(name)
}

func storetestDatabase(t *testing.T) string { return storetest.NewDatabase(t) }
