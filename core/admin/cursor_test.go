package admin_test

import (
	"testing"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/admin"
	"berth.dev/core/store"
)

// TestStateValueMapsEveryNamedState: every store state the API shows has
// its enum value by name; an unknown name is STATE_UNSPECIFIED.
func TestStateValueMapsEveryNamedState(t *testing.T) {
	for s, want := range map[store.TurnState]adminv1.Turn_State{
		store.TurnQueued: adminv1.Turn_STATE_QUEUED, store.TurnRunning: adminv1.Turn_STATE_RUNNING,
		store.TurnCompleted: adminv1.Turn_STATE_COMPLETED, store.TurnFailed: adminv1.Turn_STATE_FAILED,
		store.TurnCancelled: adminv1.Turn_STATE_CANCELLED, store.TurnTimedOut: adminv1.Turn_STATE_TIMED_OUT,
		store.TurnUnconfirmed: adminv1.Turn_STATE_UNCONFIRMED,
	} {
		if got := adminv1.Turn_State(admin.StateValue(adminv1.Turn_State_value, string(s))); got != want {
			t.Errorf("turn %q: %v, want %v", s, got, want)
		}
	}
	for s, want := range map[store.NodeState]adminv1.Node_State{
		store.NodeEnrolled: adminv1.Node_STATE_ENROLLED, store.NodeEnabled: adminv1.Node_STATE_ENABLED,
		store.NodeRetired: adminv1.Node_STATE_RETIRED, store.NodeRemoved: adminv1.Node_STATE_REMOVED,
	} {
		if got := adminv1.Node_State(admin.StateValue(adminv1.Node_State_value, string(s))); got != want {
			t.Errorf("node %q: %v, want %v", s, got, want)
		}
	}
	for _, bad := range []string{"", "unspecified", "bogus"} {
		if v := admin.StateValue(adminv1.Turn_State_value, bad); v != 0 {
			t.Errorf("%q: %d, want 0", bad, v)
		}
	}
}
