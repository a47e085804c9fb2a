package nodeadmin_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"

	"berth.dev/sandbox/errdefs"

	"berth.dev/core/admin/admintest"
	"berth.dev/core/nodeadmin"
	"berth.dev/core/store"
)

func TestGetNode(t *testing.T) {
	f := newFixture(t)
	id, tokenID := f.enrollNode(t)
	n, err := f.svc.GetNode(f.ctx, "nodes/"+id.String())
	admintest.Must(t, err)
	if n.ID != id || n.State != store.NodeEnrolled || n.AdvertiseAddress != "node.test:7443" ||
		n.EnrollmentTokenID != tokenID || n.CreatedAt.IsZero() {
		t.Fatalf("node %+v, want %s enrolled with token %s", n, id, tokenID)
	}
	_, err = f.svc.GetNode(f.ctx, "nodes/"+uuid.NewString())
	admintest.WantClass(t, err, errdefs.ErrNotFound)
	for _, bad := range []string{"", "nodes/", "nodes/node-1", "node/" + id.String(), "nodes/" + id.String() + "/x", "nodes/" + uuid.Nil.String()[:35]} {
		_, err := f.svc.GetNode(f.ctx, bad)
		admintest.WantField(t, err, "name")
	}
}

func TestNodeLifecycle(t *testing.T) {
	f := newFixture(t)
	id, _ := f.enrollNode(t)
	name := "nodes/" + id.String()
	enable := func() (nodeadmin.Node, error) { return f.svc.EnableNode(f.ctx, name) }
	retire := func() (nodeadmin.Node, error) { return f.svc.RetireNode(f.ctx, name) }
	remove := func() (nodeadmin.Node, error) { return f.svc.RemoveNode(f.ctx, name) }
	var last nodeadmin.Node
	for _, st := range []struct {
		what string
		call func() (nodeadmin.Node, error)
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
			admintest.WantClass(t, err, st.err)
		} else {
			admintest.Must(t, err)
			if n.State != st.want || n.ID != id {
				t.Fatalf("%s: node %s is %s, want %s", st.what, n.ID, n.State, st.want)
			}
		}
		got, err := f.svc.GetNode(f.ctx, name)
		admintest.Must(t, err)
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
	f := newFixture(t)
	a, _ := f.enrollNode(t)
	b, _ := f.enrollNode(t)
	n, err := f.svc.RetireNode(f.ctx, "nodes/"+a.String())
	admintest.Must(t, err)
	if n.State != store.NodeRetired {
		t.Errorf("retired enrolled node is %s", n.State)
	}
	n, err = f.svc.RemoveNode(f.ctx, "nodes/"+b.String())
	admintest.Must(t, err)
	if n.State != store.NodeRemoved {
		t.Errorf("removed enrolled node is %s", n.State)
	}
	for _, call := range []func() (nodeadmin.Node, error){
		func() (nodeadmin.Node, error) { return f.svc.EnableNode(f.ctx, "nodes/"+uuid.NewString()) },
		func() (nodeadmin.Node, error) { return f.svc.RetireNode(f.ctx, "nodes/"+uuid.NewString()) },
		func() (nodeadmin.Node, error) { return f.svc.RemoveNode(f.ctx, "nodes/"+uuid.NewString()) },
	} {
		_, err := call()
		admintest.WantClass(t, err, errdefs.ErrNotFound)
	}
	_, err = f.svc.EnableNode(f.ctx, "nodes/not-a-node")
	admintest.WantField(t, err, "name")
}

// Concurrent admins changing one node: every call decides on the state it
// finds, a lost compare-and-swap is read again, and each call ends in its
// own target state or a refusal of the state it found.
func TestConcurrentNodeChanges(t *testing.T) {
	f := newFixture(t)
	id, _ := f.enrollNode(t)
	name := "nodes/" + id.String()
	_, err := f.svc.EnableNode(f.ctx, name)
	admintest.Must(t, err)
	const admins = 8
	errs := make([]error, admins)
	nodes := make([]nodeadmin.Node, admins)
	var wg sync.WaitGroup
	for i := range admins {
		wg.Go(func() {
			if i%2 == 0 {
				nodes[i], errs[i] = f.svc.RetireNode(f.ctx, name)
			} else {
				nodes[i], errs[i] = f.svc.EnableNode(f.ctx, name)
			}
		})
	}
	wg.Wait()
	for i := range admins {
		if errs[i] != nil {
			// Only a change that kept losing the race may fail, as fenced.
			admintest.WantClass(t, errs[i], errdefs.ErrFenced)
			continue
		}
		want := store.NodeEnabled
		if i%2 == 0 {
			want = store.NodeRetired
		}
		if nodes[i].State != want {
			t.Errorf("call %d ended with the node %s, want %s", i, nodes[i].State, want)
		}
	}

	// Retiring together: all succeed, one of them writes.
	for i := range admins {
		wg.Go(func() { nodes[i], errs[i] = f.svc.RetireNode(f.ctx, name) })
	}
	wg.Wait()
	for i := range admins {
		admintest.Must(t, errs[i])
		if nodes[i].State != store.NodeRetired {
			t.Errorf("retire %d: node is %s", i, nodes[i].State)
		}
	}
}

func TestListNodes(t *testing.T) {
	f := newFixture(t)
	const total, size = 7, 3
	var want []uuid.UUID
	for range total {
		id, _ := f.enrollNode(t)
		want = append(want, id)
	}
	list := func(showRemoved bool) ([]uuid.UUID, []int) {
		t.Helper()
		var got []uuid.UUID
		var sizes []int
		pageToken := ""
		for {
			page, next, err := f.svc.ListNodes(f.ctx, size, pageToken, showRemoved)
			admintest.Must(t, err)
			sizes = append(sizes, len(page))
			for _, n := range page {
				if n.EnrollmentTokenID == "" {
					t.Errorf("listed node %s without its enrollment token", n.ID)
				}
				got = append(got, n.ID)
			}
			if next == "" {
				return got, sizes
			}
			pageToken = next
		}
	}
	// Enrollment order, whatever the random ids.
	got, sizes := list(false)
	if !slices.Equal(got, want) || !slices.Equal(sizes, []int{3, 3, 1}) {
		t.Fatalf("listed %v in pages %v\nwant %v in [3 3 1]", got, sizes, want)
	}
	_, err := f.svc.RemoveNode(f.ctx, "nodes/"+want[2].String())
	admintest.Must(t, err)
	got, _ = list(false)
	if w := slices.Delete(slices.Clone(want), 2, 3); !slices.Equal(got, w) {
		t.Errorf("without removed: %v\nwant %v", got, w)
	}
	got, _ = list(true)
	if !slices.Equal(got, want) {
		t.Errorf("with removed: %v\nwant %v", got, want)
	}
	_, next, err := f.svc.ListNodes(f.ctx, size, "", true)
	admintest.Must(t, err)
	_, _, err = f.svc.ListNodes(f.ctx, size, next, false)
	admintest.WantField(t, err, "page_token")
	_, _, err = f.svc.ListNodes(f.ctx, -5, "", false)
	admintest.WantField(t, err, "page_size")
}
