package store_test

import (
	"reflect"
	"regexp"
	"slices"
	"testing"

	"berth.dev/core/store"
)

// writeVerb is how a store write's name starts. A Reader method never
// starts with one; an Owner, Admin or Runtime method always does (doc.go,
// "Authority is in the types").
var writeVerb = regexp.MustCompile(`^(Abandon|Abort|Accept|Allocate|Append|Archive|Arm|Bind|Claim|Close|Commit|Consume|Create|Delete|End|Expire|Fail|Finalize|Finish|Mark|Move|Promote|Record|Reissue|Release|Replace|Request|Resolve|Revoke|RollBack|Set|Start|Submit|Terminate|Touch|Unconfirm|Update)`)

func methods(v any) []string {
	t := reflect.TypeOf(v)
	out := make([]string, t.NumMethod())
	for i := range out {
		out[i] = t.Method(i).Name
	}
	return out
}

// TestReaderHasNoWrite: every method of Reader reads; a write added to it
// (its name starts with a write's verb) fails here.
func TestReaderHasNoWrite(t *testing.T) {
	for _, m := range methods(&store.Reader{}) {
		if writeVerb.MatchString(m) {
			t.Errorf("Reader.%s is named as a write: writes belong to Owner, Admin or Runtime", m)
		}
	}
}

// TestWritersHaveOnlyWrites: Owner (but Epoch), Admin and Runtime hold
// only writes, and no write is on two of them or on Store, so each has one
// authority.
func TestWritersHaveOnlyWrites(t *testing.T) {
	seen := map[string]string{}
	for name, v := range map[string]any{"Owner": &store.Owner{}, "Admin": &store.Admin{}, "Runtime": &store.Runtime{}} {
		for _, m := range methods(v) {
			if name == "Owner" && m == "Epoch" {
				continue
			}
			if !writeVerb.MatchString(m) {
				t.Errorf("%s.%s is not named as a write: reads belong to Reader", name, m)
			}
			if other, ok := seen[m]; ok {
				t.Errorf("%s is on both %s and %s", m, other, name)
			}
			seen[m] = name
		}
	}
	for _, m := range methods(&store.Store{}) {
		if other, ok := seen[m]; ok {
			t.Errorf("%s.%s is reachable on Store without its authority", other, m)
		}
	}
	// Store's own writes are the start-up writes that make the others'
	// authority (and Close, of the pool); anything else there is reachable
	// without one.
	startup := []string{"AcquireLease", "ClaimInstallation", "Close", "NextOwnerEpoch", "ReleaseLease", "SaveCA"}
	for _, m := range methods(&store.Store{}) {
		if writeVerb.MatchString(m) && !slices.Contains(startup, m) {
			t.Errorf("Store.%s is a write without an authority type", m)
		}
	}
}

// TestProjectMethodsHaveTheirAuthority: the tenant and project writes are
// an operator's intent (Admin); the project-scoped reads are Reader's.
func TestProjectMethodsHaveTheirAuthority(t *testing.T) {
	for typ, want := range map[string]struct {
		v       any
		methods []string
	}{
		"Admin": {&store.Admin{}, []string{"CreateTenant", "UpdateTenant", "DeleteTenant", "CreateProject", "UpdateProject", "DeleteProject"}},
		"Reader": {&store.Reader{}, []string{"GetTenant", "ListTenantsByAge", "GetProject", "ListProjectsByAge",
			"GetSessionInProject", "ListProjectSessionsByAge"}},
	} {
		have := methods(want.v)
		for _, m := range want.methods {
			if !slices.Contains(have, m) {
				t.Errorf("%s.%s is missing", typ, m)
			}
		}
	}
}
