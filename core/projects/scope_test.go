package projects_test

import (
	"testing"

	"github.com/google/uuid"

	"berth.dev/core/projects"
)

// TestZeroScopeIsInvalid: a scope left unset fails instead of widening.
func TestZeroScopeIsInvalid(t *testing.T) {
	for name, s := range map[string]projects.Scope{"zero": {}, "In(nil)": projects.In(uuid.Nil)} {
		if s.Check() == nil {
			t.Errorf("%s: Check passed", name)
		}
		if s.Sees(uuid.Nil) || s.Sees(uuid.New()) {
			t.Errorf("%s sees a project", name)
		}
		if p, ok := s.Project(); !ok || p != uuid.Nil {
			t.Errorf("%s: Project() = %v, %v", name, p, ok)
		}
	}
	for name, s := range map[string]projects.Scope{"All": projects.All(), "In": projects.In(uuid.New())} {
		if err := s.Check(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestScopeSeesAndNarrow(t *testing.T) {
	a, b := uuid.New(), uuid.New()
	all, inA := projects.All(), projects.In(a)
	if !all.Sees(a) || !inA.Sees(a) || inA.Sees(b) {
		t.Fatal("Sees")
	}
	if _, ok := all.Project(); ok {
		t.Fatal("All has a project")
	}
	if got, _ := all.Narrow(b).Project(); got != b {
		t.Fatalf("All.Narrow(b) = %v", got)
	}
	if got, _ := inA.Narrow(a).Project(); got != a {
		t.Fatalf("In(a).Narrow(a) = %v", got)
	}
	if n := inA.Narrow(b); n.Sees(a) || n.Sees(b) || n.Check() != nil {
		t.Fatalf("In(a).Narrow(b) must see neither and stay valid: %+v", n)
	}
	if inA.Narrow(uuid.Nil) != inA || all.Narrow(uuid.Nil) != all {
		t.Fatal("Narrow(nil) changed the scope")
	}
}
