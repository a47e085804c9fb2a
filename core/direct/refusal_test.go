package direct

import (
	"math"
	"strings"
	"testing"

	"berth.dev/platform/errgrpc"
	"berth.dev/sandbox/errdefs"
)

// TestRefusalsCrossTheAdminAPI: every refusal of the package, at its
// longest (a 64-character code, the largest counts), has a reason and a
// message the admin API lets cross as they are (errgrpc.SafeMessage);
// otherwise the operator would read only "failed precondition".
func TestRefusalsCrossTheAdminAPI(t *testing.T) {
	for _, err := range []error{
		ErrNotServed, errBackendMismatch, errPublicOriginRequired, errCredentialBusy,
		candidateNotReady(strings.Repeat("x", 64)),
		credentialNotVerified(math.MaxUint64, math.MaxInt),
	} {
		r, ok := errdefs.AsRefusal(err)
		if !ok || !errgrpc.SafeMessage(r.Message) {
			t.Errorf("%q (%d characters) does not cross", err, len(err.Error()))
		}
	}
}
