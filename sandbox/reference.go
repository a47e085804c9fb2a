package sandbox

import (
	"github.com/google/uuid"

	"berth.dev/sandbox/errdefs"
)

// Reference is the exact identity of one allocation: the tenant, the
// Environment and the allocation Core persisted before Create. The
// allocation ID is fresh per allocation and never the Environment ID.
type Reference struct {
	TenantID      string
	EnvironmentID string
	AllocationID  string
}

// IsZero reports whether r is the zero Reference.
func (r Reference) IsZero() bool { return r == Reference{} }

// Validate checks that every part is a canonical lowercase UUID and that
// the allocation is not the Environment.
func (r Reference) Validate() error {
	for _, f := range []struct{ name, value string }{
		{"reference.tenant_id", r.TenantID},
		{"reference.environment_id", r.EnvironmentID},
		{"reference.allocation_id", r.AllocationID},
	} {
		if !CanonicalUUID(f.value) {
			return errdefs.Invalid(f.name, "must be a canonical lowercase UUID")
		}
	}
	if r.AllocationID == r.EnvironmentID {
		return errdefs.Invalid("reference.allocation_id", "must differ from the environment id")
	}
	return nil
}

// CanonicalUUID reports whether s is a UUID in canonical lowercase,
// hyphenated 36-character form (no braces, no URN prefix, no upper case).
func CanonicalUUID(s string) bool {
	id, err := uuid.Parse(s)
	return err == nil && id.String() == s
}
