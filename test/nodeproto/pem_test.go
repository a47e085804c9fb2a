package nodeproto

import (
	"testing"

	"berth.dev/sandbox/providercontract"

	"berth.dev/core/store/storetest"
)

func providercontractOp(name string) providercontract.Operation {
	return providercontract.Operation(name)
}

func storetestDatabase(t *testing.T) string { return storetest.NewDatabase(t) }
