package nodewire

import (
	"math"
	"math/rand"
	"time"

	"github.com/google/uuid"

	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
)

// gen draws contract values for the property tests: valid ones by default,
// and arbitrary ones (valid or not) from the wild* methods.
type gen struct{ r *rand.Rand }

func newGen(seed int64) gen { return gen{rand.New(rand.NewSource(seed))} }

func (g gen) uuid() string { return uuid.Must(uuid.NewRandomFromReader(g.r)).String() }

func (g gen) ref() sandbox.Reference {
	env := g.uuid()
	return sandbox.Reference{TenantID: g.uuid(), EnvironmentID: env, AllocationID: g.uuid()}
}

func (g gen) word() string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789-_/.:"
	b := make([]byte, 1+g.r.Intn(24))
	for i := range b {
		b[i] = letters[g.r.Intn(len(letters))]
	}
	return string(b)
}

func (g gen) bytes(maxLen int) []byte {
	n := g.r.Intn(maxLen + 1)
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	g.r.Read(b)
	return b
}

func (g gen) time() time.Time {
	if g.r.Intn(3) == 0 {
		return time.Time{}
	}
	// Within the Timestamp range (years 1970 to 9999).
	return time.Unix(g.r.Int63n(253402300799), g.r.Int63n(1e9)).UTC()
}

var states = []sandbox.State{
	sandbox.StateAbsent, sandbox.StateCreated, sandbox.StateRunning, sandbox.StatePaused, sandbox.StateStopped, "",
}

func (g gen) info() sandbox.Info {
	if g.r.Intn(8) == 0 {
		return sandbox.Info{}
	}
	i := sandbox.Info{
		Reference:     g.ref(),
		State:         states[g.r.Intn(len(states))],
		CreateSettled: g.r.Intn(2) == 0,
		LeaseExpiry:   g.time(),
	}
	if i.State != sandbox.StateAbsent && g.r.Intn(4) != 0 {
		i.ProviderID = g.word()
		i.BootstrapComplete = g.r.Intn(2) == 0
	}
	return i
}

// wildInfo is any Info, contradictory or not.
func (g gen) wildInfo() sandbox.Info {
	i := g.info()
	switch g.r.Intn(6) {
	case 0:
		i.State = sandbox.State(g.word())
	case 1:
		i.Reference.AllocationID = i.Reference.EnvironmentID
	case 2:
		i.ProviderID = ""
		i.BootstrapComplete = true
	case 3:
		i.Reference = sandbox.Reference{}
	case 4:
		i.LeaseExpiry = time.Date(10000+g.r.Intn(100), 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return i
}

func (g gen) resources() sandbox.Resources {
	return sandbox.Resources{
		CPUMillis:   sandbox.MinCPUMillis + g.r.Int63n(sandbox.MaxCPUMillis-sandbox.MinCPUMillis+1),
		MemoryBytes: sandbox.MinMemoryBytes + g.r.Int63n(sandbox.MaxMemoryBytes-sandbox.MinMemoryBytes+1),
		DiskBytes:   sandbox.MinDiskBytes + g.r.Int63n(sandbox.MaxDiskBytes-sandbox.MinDiskBytes+1),
	}
}

func (g gen) bootstrap() runtimebootstrap.File {
	const printable = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!#$%&*+-./:;<=>?@^_~"
	cred := make([]byte, runtimebootstrap.MinCredentialBytes+g.r.Intn(runtimebootstrap.MaxCredentialBytes-runtimebootstrap.MinCredentialBytes+1))
	for i := range cred {
		cred[i] = printable[g.r.Intn(len(printable))]
	}
	return runtimebootstrap.File{
		Version:    runtimebootstrap.Version,
		CoreURL:    "https://core-" + g.uuid()[:8] + ".example.test/berth",
		DeviceID:   g.uuid(),
		Credential: runtimebootstrap.NewSecret(string(cred)),
	}
}

func (g gen) createRequest() sandbox.CreateRequest {
	return sandbox.CreateRequest{Reference: g.ref(), Resources: g.resources(), Bootstrap: g.bootstrap()}
}

func (g gen) command() sandbox.Command {
	args := make([]string, 1+g.r.Intn(6))
	for i := range args {
		args[i] = g.word()
	}
	c := sandbox.Command{Args: args, Stdin: g.bytes(64), OutputLimit: g.r.Intn(sandbox.MaxOutputLimit + 1)}
	if g.r.Intn(2) == 0 {
		c.Directory = "/work/" + g.uuid()[:8]
	}
	return c
}

// wildCommand is any Command, valid or not.
func (g gen) wildCommand() sandbox.Command {
	c := g.command()
	switch g.r.Intn(5) {
	case 0:
		c.OutputLimit = g.r.Intn(math.MaxInt32) * (1 - 2*g.r.Intn(2))
	case 1:
		c.OutputLimit = math.MaxInt32 + 1 + g.r.Intn(1000)
	case 2:
		c.Directory = "relative/" + g.word()
	case 3:
		c.Args = nil
	}
	return c
}

func (g gen) commandResult() sandbox.CommandResult {
	return sandbox.CommandResult{
		Stdout:          g.bytes(256),
		Stderr:          g.bytes(256),
		StdoutTruncated: g.r.Intn(2) == 0,
		StderrTruncated: g.r.Intn(2) == 0,
		ExitCode:        int(g.r.Int31()) - math.MaxInt32/2,
	}
}

// wildCommandResult may carry an exit code that does not fit int32.
func (g gen) wildCommandResult() sandbox.CommandResult {
	r := g.commandResult()
	if g.r.Intn(3) == 0 {
		r.ExitCode = (math.MaxInt32 + 1 + g.r.Intn(1<<20)) * (1 - 2*g.r.Intn(2))
	}
	return r
}

func (g gen) observation() sandbox.Observation {
	return sandbox.Observation{
		Reference: g.ref(), CPUUsageNanos: g.r.Uint64(), MemoryBytes: g.r.Uint64(),
		MemoryLimitBytes: g.r.Uint64(), PIDs: g.r.Uint64(),
	}
}

func (g gen) compute() sandbox.Compute {
	return sandbox.Compute{Reference: g.ref(), Generation: g.r.Uint64(), Name: g.word(), ID: g.word()}
}

var computeStates = []sandbox.ComputeState{
	sandbox.ComputeAbsent, sandbox.ComputeRunning, sandbox.ComputePaused, sandbox.ComputeStopped,
}

func (g gen) computeInfo() sandbox.ComputeInfo {
	return sandbox.ComputeInfo{Compute: g.compute(), State: computeStates[g.r.Intn(len(computeStates))]}
}

// wildComputeInfo is any ComputeInfo, valid or not.
func (g gen) wildComputeInfo() sandbox.ComputeInfo {
	ci := g.computeInfo()
	switch g.r.Intn(4) {
	case 0:
		ci.State = ""
	case 1:
		ci.State = sandbox.ComputeState(g.word())
	case 2:
		ci.Compute.Reference.TenantID = g.word()
	}
	return ci
}

func (g gen) snapshot() sandbox.SnapshotIdentity {
	s := sandbox.SnapshotIdentity{ID: g.word()}
	if g.r.Intn(2) == 0 {
		s.Provenance = g.word()
	}
	return s
}
