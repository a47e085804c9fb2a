package dockertest

import (
	"context"
	"maps"

	"github.com/google/uuid"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker"
)

// Native adapts a Server to contracttest.Native for the Docker adapter of
// one installation, wherever that adapter runs (in-process or behind a node
// agent). The readiness probe's calls (ping, version, info, image inspect)
// are left out of Calls: they belong to no operation.
type Native struct {
	Server       *Server
	Installation string
	foreign      map[string]map[string]string
}

var _ contracttest.Native = (*Native)(nil)

// NewNative returns the contract-suite view of s for installation.
func NewNative(s *Server, installation string) *Native {
	return &Native{Server: s, Installation: installation, foreign: map[string]map[string]string{}}
}

// Arm maps the suite's faults onto the fixture's.
func (n *Native) Arm(call string, fault contracttest.Fault, cancel context.CancelFunc) {
	switch fault {
	case contracttest.FaultTransport:
		n.Server.Arm(call, FaultDrop, nil)
	case contracttest.FaultCancelAfterDispatch:
		n.Server.Arm(call, FaultCancelAfterDispatch, cancel)
	case contracttest.FaultCleanupFailure:
		n.Server.Arm(call, FaultServerError, nil)
	}
}

func (n *Native) names(ref sandbox.Reference) (container, home, env string) {
	c := docker.ResourceName(n.Installation, ref)
	return c, c + "-home", c + "-environment"
}

// PlantForeign creates a container and both volumes with ref's names but
// another tenant's labels.
func (n *Native) PlantForeign(ref sandbox.Reference) {
	labels := map[string]string{
		docker.LabelInstallation: n.Installation,
		docker.LabelTenant:       uuid.NewString(),
		docker.LabelEnvironment:  ref.EnvironmentID,
		docker.LabelAllocation:   ref.AllocationID,
	}
	c, home, env := n.names(ref)
	n.Server.PutContainer(c, labels, StateRunning)
	n.Server.PutVolume(home, labels)
	n.Server.PutVolume(env, labels)
	for _, name := range []string{c, home, env} {
		n.foreign[name] = maps.Clone(labels)
	}
}

// ForeignIntact reports whether every planted resource is unchanged.
func (n *Native) ForeignIntact() bool {
	for name, want := range n.foreign {
		var got map[string]string
		if c, ok := n.Server.Container(name); ok {
			got = c.Labels
		} else if v, ok := n.Server.Volume(name); ok {
			got = v.Labels
		} else {
			return false
		}
		if !maps.Equal(got, want) {
			return false
		}
	}
	return true
}

var probeCalls = map[string]bool{CallPing: true, CallVersion: true, CallInfo: true, CallImageInspect: true}

// Calls returns the operation calls received since ResetCalls.
func (n *Native) Calls() []contracttest.NativeCall {
	var out []contracttest.NativeCall
	for _, c := range n.Server.Calls() {
		if probeCalls[c.Name] {
			continue
		}
		out = append(out, contracttest.NativeCall{Name: c.Name, Mutating: c.Mutating})
	}
	return out
}

// ResetCalls forgets the recorded calls.
func (n *Native) ResetCalls() { n.Server.ResetCalls() }

// Sensitive lists what must never appear in an adapter's error.
func (n *Native) Sensitive() []string { return n.Server.Sensitive() }

var _ contracttest.CheckpointNative = (*Native)(nil)

// PauseCompute pauses ref's first incarnation, as an aborted suspend
// leaves it.
func (n *Native) PauseCompute(ref sandbox.Reference) {
	c, _, _ := n.names(ref)
	n.Server.SetContainerState(c, StatePaused)
}

// StopCompute stops ref's first incarnation, as something outside Berth
// would.
func (n *Native) StopCompute(ref sandbox.Reference) {
	c, _, _ := n.names(ref)
	n.Server.SetContainerState(c, StateExited)
}

// PlantForeignSnapshot creates a holder container and both volumes under
// the names of the snapshot a Suspend of ref under operationID would
// make, with another tenant's labels.
func (n *Native) PlantForeignSnapshot(ref sandbox.Reference, operationID string) sandbox.SnapshotIdentity {
	name := docker.SnapshotResourceName(n.Installation, ref, operationID)
	labels := map[string]string{
		docker.LabelInstallation:      n.Installation,
		docker.LabelTenant:            uuid.NewString(),
		docker.LabelEnvironment:       ref.EnvironmentID,
		docker.LabelAllocation:        ref.AllocationID,
		docker.LabelSnapshotOperation: operationID,
		docker.LabelSnapshotRole:      "holder",
	}
	n.Server.PutContainer(name, labels, StateCreated)
	for _, v := range []string{name + "-home", name + "-environment"} {
		n.Server.PutVolume(v, labels)
	}
	for _, r := range []string{name, name + "-home", name + "-environment"} {
		n.foreign[r] = maps.Clone(labels)
	}
	return sandbox.SnapshotIdentity{ID: name}
}
