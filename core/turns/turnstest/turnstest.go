package turnstest

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"berth.dev/core/events"
	"berth.dev/core/secrets"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/core/turns"
)

// Fixture is a Turn service acting for the lease-holding owner epoch, with
// a Session whose allocation runs (storetest.RunningSession).
type Fixture struct {
	Svc     *turns.Service
	St      *storetest.Owned
	Session store.SessionBundle
	// Cred is the Session's device credential, as its Runtime presents it.
	Cred []byte
	// Bus is what Svc publishes on.
	Bus *events.Bus
}

// New returns a Fixture on a fresh database.
func New(t *testing.T) Fixture {
	t.Helper()
	st := storetest.Owner(t, storetest.New(t))
	inst, err := st.GetInstallation(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := secrets.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	b, cred := storetest.RunningSession(t, st)
	bus := events.New()
	return Fixture{Svc: turns.New(st, key, inst.ID, uuid.New, bus), St: st, Session: b, Cred: cred, Bus: bus}
}
