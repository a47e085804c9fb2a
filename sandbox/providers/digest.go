package providers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"berth.dev/sandbox"
)

// DeploymentDigest identifies a deployment generation's selection as a
// node serves it: the provider kind and the specification. The node agent
// reports it in Hello for the generation in its configuration and Core
// computes it for its committed generation; both sides call this one
// function, so the digests agree exactly when the selections do. A node
// provider's deployment configuration is always the empty object
// (nodeconfig), so it adds nothing.
//
// It is not the adapter's specification digest (Built.SpecificationDigest),
// which also covers node-local settings (for Docker the image, network
// and seccomp profile) that Core does not know.
func DeploymentDigest(kind string, spec sandbox.Specification) string {
	doc, _ := json.Marshal(struct {
		Version     int
		Kind        string
		CPUMillis   int64
		MemoryBytes int64
		DiskBytes   int64
		MaxActive   int32
		MaxRetained int32
		IdleNanos   int64
		RetainNanos int64
	}{
		1, kind,
		spec.Resources.CPUMillis, spec.Resources.MemoryBytes, spec.Resources.DiskBytes,
		spec.MaxActive, spec.MaxRetained,
		int64(spec.Suspension.Idle), int64(spec.Suspension.Retention),
	})
	sum := sha256.Sum256(doc)
	return "sha256:" + hex.EncodeToString(sum[:])
}
