package secrets

import (
	"strconv"

	"github.com/google/uuid"
)

// Binding is what a sealed value belongs to: the additional data it is
// sealed with, so a ciphertext copied to another row, resource or
// installation does not open. Every binding Core uses is made here, in one
// place, and Seal and Open take nothing else: a value sealed without a
// binding does not compile. The store keeps the sealed bytes and knows
// none of this.
type Binding struct{ ad []byte }

func bind(kind string, parts ...string) Binding {
	ad := []byte("berth-" + kind)
	for _, p := range parts {
		ad = append(append(ad, ':'), p...)
	}
	return Binding{ad: ad}
}

// DeviceCredential binds an allocation's Runtime device credential to the
// installation and the allocation.
func DeviceCredential(installation, allocation uuid.UUID) Binding {
	return bind("device-credential", installation.String(), allocation.String())
}

// TurnInput binds a Turn's sealed environment and stdin to the
// installation and the Turn.
func TurnInput(installation, turn uuid.UUID) Binding {
	return bind("turn-input", installation.String(), turn.String())
}

// DeploymentCredential binds a deployment generation's provider
// credential to the installation and the generation number, so it opens
// in no other generation's row.
func DeploymentCredential(installation uuid.UUID, generation uint64) Binding {
	return bind("deployment-credential", installation.String(), strconv.FormatUint(generation, 10))
}

// InstallationCAKey binds the installation CA's private key to the
// installation.
func InstallationCAKey(installation string) Binding {
	return bind("installation-ca", installation)
}
