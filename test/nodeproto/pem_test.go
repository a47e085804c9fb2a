package nodeproto

import (
	"encoding/pem"
	"os"

	"berth.dev/sandbox/providercontract"
)

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func benchSamples() string { return os.Getenv("BERTH_BENCH_SAMPLES") }

func providercontractOp(name string) providercontract.Operation {
	return providercontract.Operation(name)
}
