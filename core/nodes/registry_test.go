package nodes_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"

	"berth.dev/platform/errgrpc"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/enrollment/enrollmenttest"
	"berth.dev/core/nodes"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

// Names of nodes are the admin adapter's to check (core/nodeadmin's
// tests); the Registry takes ids.
func TestGetNode(t *testing.T) {
	f := enrollmenttest.New(t)
	id, tokenID := f.EnrollNode(t)
	n, err := f.Registry.Get(f.Ctx, id)
	errdefstest.Must(t, err)
	if n.ID != id || n.State != store.NodeEnrolled || n.AdvertiseAddress != "node.test:7443" ||
		n.EnrollmentTokenID != tokenID || n.CreatedAt.IsZero() {
		t.Fatalf("node %+v, want %s enrolled with token %s", n, id, tokenID)
	}
	_, err = f.Registry.Get(f.Ctx, uuid.New())
	errdefstest.WantClass(t, err, errdefs.ErrNotFound)
}

func TestNodeLifecycle(t *testing.T) {
	f := enrollmenttest.New(t)
	id, _ := f.EnrollNode(t)
	enable := func() (nodes.Node, error) { return f.Registry.Enable(f.Ctx, id, store.NewAdminProvenance(uuid.New())) }
	retire := func() (nodes.Node, error) { return f.Registry.Retire(f.Ctx, id, store.NewAdminProvenance(uuid.New())) }
	remove := func() (nodes.Node, error) { return f.Registry.Remove(f.Ctx, id, store.NewAdminProvenance(uuid.New())) }
	var last nodes.Node
	for _, st := range []struct {
		what string
		call func() (nodes.Node, error)
		want store.NodeState
		err  error
		same bool // the node comes back unchanged
	}{
		{"enable enrolled", enable, store.NodeEnabled, nil, false},
		{"enable enabled", enable, store.NodeEnabled, nil, true},
		{"remove enabled", remove, store.NodeEnabled, errdefs.ErrFailedPrecondition, true},
		{"retire enabled", retire, store.NodeRetired, nil, false},
		{"retire retired", retire, store.NodeRetired, nil, true},
		{"enable retired", enable, store.NodeEnabled, nil, false},
		{"retire again", retire, store.NodeRetired, nil, false},
		{"remove retired", remove, store.NodeRemoved, nil, false},
		{"remove removed", remove, store.NodeRemoved, nil, true},
		{"enable removed", enable, store.NodeRemoved, errdefs.ErrFailedPrecondition, true},
		{"retire removed", retire, store.NodeRemoved, errdefs.ErrFailedPrecondition, true},
	} {
		n, err := st.call()
		if st.err != nil {
			errdefstest.WantClass(t, err, st.err)
		} else {
			errdefstest.Must(t, err)
			if n.State != st.want || n.ID != id {
				t.Fatalf("%s: node %s is %s, want %s", st.what, n.ID, n.State, st.want)
			}
		}
		got, err := f.Registry.Get(f.Ctx, id)
		errdefstest.Must(t, err)
		if got.State != st.want {
			t.Fatalf("%s: stored state %s, want %s", st.what, got.State, st.want)
		}
		if st.same && !got.UpdatedAt.Equal(last.UpdatedAt) {
			t.Fatalf("%s: the node was written (updated %v, before %v)", st.what, got.UpdatedAt, last.UpdatedAt)
		}
		last = got
	}
	// A removed node keeps its identity: its token still names it.
	if last.EnrollmentTokenID == "" {
		t.Error("removed node lost its enrollment token")
	}
}

func TestEnrolledNodeCanBeRetiredOrRemoved(t *testing.T) {
	f := enrollmenttest.New(t)
	a, _ := f.EnrollNode(t)
	b, _ := f.EnrollNode(t)
	n, err := f.Registry.Retire(f.Ctx, a, store.NewAdminProvenance(uuid.New()))
	errdefstest.Must(t, err)
	if n.State != store.NodeRetired {
		t.Errorf("retired enrolled node is %s", n.State)
	}
	n, err = f.Registry.Remove(f.Ctx, b, store.NewAdminProvenance(uuid.New()))
	errdefstest.Must(t, err)
	if n.State != store.NodeRemoved {
		t.Errorf("removed enrolled node is %s", n.State)
	}
	for _, call := range []func() (nodes.Node, error){
		func() (nodes.Node, error) {
			return f.Registry.Enable(f.Ctx, uuid.New(), store.NewAdminProvenance(uuid.New()))
		},
		func() (nodes.Node, error) {
			return f.Registry.Retire(f.Ctx, uuid.New(), store.NewAdminProvenance(uuid.New()))
		},
		func() (nodes.Node, error) {
			return f.Registry.Remove(f.Ctx, uuid.New(), store.NewAdminProvenance(uuid.New()))
		},
	} {
		_, err := call()
		errdefstest.WantClass(t, err, errdefs.ErrNotFound)
	}
}

// Concurrent admins changing one node: every call decides on the state it
// finds, a lost compare-and-swap is read again, and each call ends in its
// own target state or a refusal of the state it found.
func TestConcurrentNodeChanges(t *testing.T) {
	f := enrollmenttest.New(t)
	id, _ := f.EnrollNode(t)
	_, err := f.Registry.Enable(f.Ctx, id, store.NewAdminProvenance(uuid.New()))
	errdefstest.Must(t, err)
	const admins = 8
	errs := make([]error, admins)
	got := make([]nodes.Node, admins)
	var wg sync.WaitGroup
	for i := range admins {
		wg.Go(func() {
			if i%2 == 0 {
				got[i], errs[i] = f.Registry.Retire(f.Ctx, id, store.NewAdminProvenance(uuid.New()))
			} else {
				got[i], errs[i] = f.Registry.Enable(f.Ctx, id, store.NewAdminProvenance(uuid.New()))
			}
		})
	}
	wg.Wait()
	for i := range admins {
		if errs[i] != nil {
			// Only a change that kept losing the race may fail, as fenced.
			errdefstest.WantClass(t, errs[i], errdefs.ErrFenced)
			continue
		}
		want := store.NodeEnabled
		if i%2 == 0 {
			want = store.NodeRetired
		}
		if got[i].State != want {
			t.Errorf("call %d ended with the node %s, want %s", i, got[i].State, want)
		}
	}

	// Retiring together: all succeed, one of them writes.
	for i := range admins {
		wg.Go(func() { got[i], errs[i] = f.Registry.Retire(f.Ctx, id, store.NewAdminProvenance(uuid.New())) })
	}
	wg.Wait()
	for i := range admins {
		errdefstest.Must(t, errs[i])
		if got[i].State != store.NodeRetired {
			t.Errorf("retire %d: node is %s", i, got[i].State)
		}
	}
}

// Page sizes and page tokens are the admin adapter's (core/nodeadmin's
// tests); the Registry lists by keyset cursor and limit.
func TestListNodes(t *testing.T) {
	f := enrollmenttest.New(t)
	const total, size = 7, 3
	var want []uuid.UUID
	for range total {
		id, _ := f.EnrollNode(t)
		want = append(want, id)
	}
	list := func(includeRemoved bool) ([]uuid.UUID, []int) {
		t.Helper()
		listed, sizes := storetest.Pages(t, size, func(after store.NodeCursor) ([]nodes.Node, error) {
			return f.Registry.List(f.Ctx, after, size, includeRemoved)
		}, func(last nodes.Node) store.NodeCursor {
			return store.NodeCursor{CreatedAt: last.CreatedAt, ID: last.ID}
		})
		var got []uuid.UUID
		for _, n := range listed {
			if n.EnrollmentTokenID == "" {
				t.Errorf("listed node %s without its enrollment token", n.ID)
			}
			got = append(got, n.ID)
		}
		return got, sizes
	}
	// Enrollment order, whatever the random ids.
	got, sizes := list(false)
	if !slices.Equal(got, want) || !slices.Equal(sizes, []int{3, 3, 1}) {
		t.Fatalf("listed %v in pages %v\nwant %v in [3 3 1]", got, sizes, want)
	}
	_, err := f.Registry.Remove(f.Ctx, want[2], store.NewAdminProvenance(uuid.New()))
	errdefstest.Must(t, err)
	got, _ = list(false)
	if w := slices.Delete(slices.Clone(want), 2, 3); !slices.Equal(got, w) {
		t.Errorf("without removed: %v\nwant %v", got, w)
	}
	got, _ = list(true)
	if !slices.Equal(got, want) {
		t.Errorf("with removed: %v\nwant %v", got, want)
	}
	// A limit outside the store's bounds is refused, naming it.
	for _, limit := range []int{0, -5} {
		_, err = f.Registry.List(f.Ctx, store.NodeCursor{}, limit, false)
		errdefstest.WantField(t, err, "limit")
	}
}

// TestRetirementRunsThroughTheGate: retiring an enabled or enrolled node
// runs its compare-and-swap inside the gate (the lifecycle drain); a
// retired or removed node does not touch the gate; a gate whose drain
// failed leaves the node as it was and answers ErrRetireUndrained (reason
// owner_failure).
func TestRetirementRunsThroughTheGate(t *testing.T) {
	f := enrollmenttest.New(t)
	id, _ := f.EnrollNode(t)
	_, err := f.Registry.Enable(f.Ctx, id, store.NewAdminProvenance(uuid.New()))
	errdefstest.Must(t, err)

	undrained := true
	var gated []uuid.UUID
	reg, err := nodes.NewRegistry(f.St, nodes.RegistryOptions{Gate: func(_ context.Context, ids []uuid.UUID, retire func() error) error {
		gated = append(gated, ids...)
		if undrained {
			return nodes.ErrRetireUndrained
		}
		// Inside the gate the node is still enabled until retire runs.
		if n, err := f.Registry.Get(f.Ctx, ids[0]); err != nil || n.State != store.NodeEnabled {
			t.Errorf("inside the gate before retire: %v, %v", n.State, err)
		}
		return retire()
	}})
	errdefstest.Must(t, err)
	_, err = reg.Retire(f.Ctx, id, store.NewAdminProvenance(uuid.New()))
	if r, ok := errdefs.AsRefusal(err); !ok || r.Reason != "owner_failure" || !errdefs.IsFailedPrecondition(err) || !errgrpc.SafeMessage(r.Message) {
		t.Fatalf("retire with an undrained worker: %v, want the owner_failure refusal", err)
	}
	if n, err := reg.Get(f.Ctx, id); err != nil || n.State != store.NodeEnabled {
		t.Fatalf("after a failed drain the node is %s (%v), want enabled", n.State, err)
	}

	undrained = false
	n, err := reg.Retire(f.Ctx, id, store.NewAdminProvenance(uuid.New()))
	errdefstest.Must(t, err)
	if n.State != store.NodeRetired {
		t.Fatalf("retired node is %s", n.State)
	}
	// Retiring it again, or a removed node, has nothing to drain.
	_, err = reg.Retire(f.Ctx, id, store.NewAdminProvenance(uuid.New()))
	errdefstest.Must(t, err)
	_, err = reg.Remove(f.Ctx, id, store.NewAdminProvenance(uuid.New()))
	errdefstest.Must(t, err)
	_, err = reg.Retire(f.Ctx, id, store.NewAdminProvenance(uuid.New()))
	errdefstest.WantClass(t, err, errdefs.ErrFailedPrecondition)
	if len(gated) != 2 || gated[0] != id || gated[1] != id {
		t.Fatalf("the gate ran for %v, want twice for the enabled node", gated)
	}
}

// TestRefusalsCrossTheAdminBoundary: every refusal of the registry and of
// the manager keeps its own reason and message at the admin API (a
// message the boundary does not accept as authored would be replaced by
// the class's generic one).
func TestRefusalsCrossTheAdminBoundary(t *testing.T) {
	for _, err := range nodes.Refusals() {
		r, ok := errdefs.AsRefusal(err)
		if !ok {
			t.Fatalf("%v is not a refusal", err)
		}
		if !errgrpc.SafeMessage(r.Message) {
			t.Errorf("refusal %s: message %q is not one the boundary sends (at most 160 characters of the authored form)", r.Reason, r.Message)
		}
	}
}
