package msbtest

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/microsandbox"
)

// Image and ImageDigest are the Runtime image the fixture holds.
const (
	Image       = "berth-runtime:test"
	ImageDigest = "sha256:3c1f6a0e9b8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// Build builds fakemsb once per test binary and returns its path. Call
// Cleanup from TestMain to remove it.
func Build(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "berth-fakemsb-")
		if buildErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(buildDir, "msb"), "berth.dev/sandbox/microsandbox/msbtest/fakemsb").CombinedOutput()
		if err != nil {
			buildErr = errors.New("build fakemsb: " + err.Error() + ": " + string(out))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "msb")
}

// Cleanup removes what Build made.
func Cleanup() {
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}

// Fixture is one fake msb installation: its executable and MSB_HOME.
type Fixture struct {
	Bin, Home string
	// Installation is the installation of the adapter under test, for
	// PlantForeign's names.
	Installation string

	t       testing.TB
	mu      sync.Mutex
	foreign map[string][]byte
}

// Start returns a fixture in a fresh MSB_HOME holding the Runtime image,
// whose sandboxes boot (SetBoot changes that).
func Start(t testing.TB, installation string) *Fixture {
	t.Helper()
	f := &Fixture{Bin: Build(t), Home: t.TempDir(), Installation: installation, t: t, foreign: map[string][]byte{}}
	f.update(func(st *state) { st.Images[Image] = ImageDigest; st.Boot = "ok" })
	return f
}

// Install lays the fixture's executable out as the pinned release is
// installed, dir/bin/msb with a placeholder dir/lib/libkrunfw beside it
// (what the probe's artifact check reads; fakemsb never loads it), and
// points Bin at that copy: a node agent configured with Bin passes the
// probe up to the image, which the fixture holds.
func (f *Fixture) Install(dir string) {
	f.t.Helper()
	exe, err := os.ReadFile(f.Bin)
	if err != nil {
		f.t.Fatal(err)
	}
	bin, lib := filepath.Join(dir, "bin", "msb"), filepath.Join(dir, "lib", microsandbox.PinnedLibkrunfw)
	for _, d := range []string{filepath.Dir(bin), filepath.Dir(lib)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.t.Fatal(err)
		}
	}
	if err := os.WriteFile(bin, exe, 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(lib, []byte("placeholder: fakemsb boots nothing\n"), 0o644); err != nil {
		f.t.Fatal(err)
	}
	f.Bin = bin
}

// Runner is the adapter's real msb runner pointed at the fixture.
func (f *Fixture) Runner() microsandbox.Exec {
	return microsandbox.Exec{Path: f.Bin, Home: f.Home}
}

// state mirrors fakemsb's state file.
type state struct {
	Images    map[string]string          `json:"images"`
	Sandboxes map[string]json.RawMessage `json:"sandboxes"`
	Boot      string                     `json:"boot"`
	Faults    []fault                    `json:"faults"`
	Calls     []call                     `json:"calls"`
}

type fault struct {
	Call string `json:"call"`
	Kind string `json:"kind"`
}

type call struct {
	Name string   `json:"name"`
	Args []string `json:"args"`
}

func (f *Fixture) dir() string { return filepath.Join(f.Home, "fake") }

// update changes the state under fakemsb's lock.
func (f *Fixture) update(change func(*state)) {
	f.t.Helper()
	if err := os.MkdirAll(f.dir(), 0o700); err != nil {
		f.t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(f.dir(), "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		f.t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		f.t.Fatal(err)
	}
	st := state{Images: map[string]string{}, Sandboxes: map[string]json.RawMessage{}, Boot: "ok"}
	name := filepath.Join(f.dir(), "state.json")
	if b, err := os.ReadFile(name); err == nil {
		if err := json.Unmarshal(b, &st); err != nil {
			f.t.Fatal(err)
		}
	}
	if st.Sandboxes == nil {
		st.Sandboxes = map[string]json.RawMessage{}
	}
	change(&st)
	b, err := json.Marshal(st)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(name+".tmp", b, 0o600); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Rename(name+".tmp", name); err != nil {
		f.t.Fatal(err)
	}
}

func (f *Fixture) read() state {
	var st state
	f.update(func(s *state) { st = *s })
	return st
}

// SetBoot sets what booting does: true runs the sandbox, false leaves
// it Stopped with msb's boot failure (a host without virtualization).
func (f *Fixture) SetBoot(ok bool) {
	f.update(func(st *state) {
		st.Boot = map[bool]string{true: "ok", false: "fail"}[ok]
	})
}

// The fixture's fault kinds beyond contracttest's.
const (
	// FaultFail: msb exits 1 before doing anything.
	FaultFail contracttest.Fault = "fail"
	// FaultEmpty: list answers [] whatever exists.
	FaultEmpty contracttest.Fault = "empty"
	// FaultHang: msb does nothing and hangs until killed; cancel (as for
	// FaultCancelAfterDispatch) runs once it hangs.
	FaultHang contracttest.Fault = "hang"
)

// Arm makes the next msb call named call fail with fault. For
// FaultCancelAfterDispatch the fake does the work, then hangs, and cancel
// runs once it has; for FaultHang it hangs without doing anything.
func (f *Fixture) Arm(call string, fault_ contracttest.Fault, cancel context.CancelFunc) {
	kind := map[contracttest.Fault]string{
		contracttest.FaultTransport: "transport", contracttest.FaultCancelAfterDispatch: "dispatch",
		contracttest.FaultCleanupFailure: "cleanup", FaultFail: "fail", FaultEmpty: "empty", FaultHang: "hang",
	}[fault_]
	if kind == "" {
		f.t.Fatalf("fixture cannot arm %s", fault_)
	}
	marker := filepath.Join(f.dir(), "dispatched")
	_ = os.Remove(marker)
	f.update(func(st *state) { st.Faults = append(st.Faults, fault{Call: call, Kind: kind}) })
	if kind != "dispatch" && kind != "hang" {
		return
	}
	done := make(chan struct{})
	f.t.Cleanup(func() { close(done) })
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if _, err := os.Stat(marker); err == nil {
				cancel()
				return
			}
		}
	}()
}

// PlantForeign creates a sandbox under ref's name labelled for another
// tenant, running.
func (f *Fixture) PlantForeign(ref sandbox.Reference) {
	name := microsandbox.ResourceName(f.Installation, ref)
	rec, _ := json.Marshal(map[string]any{
		"name": name, "status": "Running", "image": Image, "digest": ImageDigest,
		"labels": map[string]string{
			microsandbox.LabelInstallation: f.Installation, microsandbox.LabelTenant: contracttest.NewReference().TenantID,
			microsandbox.LabelEnvironment: ref.EnvironmentID, microsandbox.LabelAllocation: ref.AllocationID,
		},
		"cpus": 1, "memory_mib": 256, "disk_mib": 1024, "created_at": time.Now().UTC().Format(time.RFC3339Nano),
	})
	f.update(func(st *state) { st.Sandboxes[name] = rec })
	f.mu.Lock()
	f.foreign[name] = rec
	f.mu.Unlock()
}

// ForeignIntact reports whether every planted foreign sandbox is still
// there unchanged.
func (f *Fixture) ForeignIntact() bool {
	st := f.read()
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, want := range f.foreign {
		var got, planted Sandbox
		if json.Unmarshal(st.Sandboxes[name], &got) != nil || json.Unmarshal(want, &planted) != nil ||
			!reflect.DeepEqual(got, planted) {
			return false
		}
	}
	return true
}

// mutating are the calls that change msb state.
var mutating = []string{"run", "create", "start", "stop", "remove", "exec"}

// probeCalls are the readiness probe's recorded calls (fakemsb records
// no `--version`). They belong to no operation, and a node agent probes
// beside every health report, so Calls leaves them out; Args keeps them.
var probeCalls = []string{"image.inspect"}

// Calls returns the operation calls received since the last ResetCalls.
func (f *Fixture) Calls() []contracttest.NativeCall {
	var out []contracttest.NativeCall
	for _, c := range f.read().Calls {
		if slices.Contains(probeCalls, c.Name) {
			continue
		}
		out = append(out, contracttest.NativeCall{Name: c.Name, Mutating: slices.Contains(mutating, c.Name)})
	}
	return out
}

// Args returns the argv of every call received since the last ResetCalls.
func (f *Fixture) Args() [][]string {
	st := f.read()
	out := make([][]string, len(st.Calls))
	for i, c := range st.Calls {
		out[i] = c.Args
	}
	return out
}

// ResetCalls forgets the recorded calls.
func (f *Fixture) ResetCalls() { f.update(func(st *state) { st.Calls = nil }) }

// Sensitive lists what must never appear in an adapter error: the
// fixture's paths and msb's error words.
func (f *Fixture) Sensitive() []string {
	return []string{f.Home, f.Bin, "sandbox not found", "injected failure", "database is locked", "agent relay"}
}

// Sandbox is one record as the fixture holds it.
type Sandbox struct {
	Name   string            `json:"name"`
	Status string            `json:"status"`
	Labels map[string]string `json:"labels"`
	Cmd    []string          `json:"cmd"`
	Mounts []string          `json:"mounts"`
}

// Sandboxes returns every record.
func (f *Fixture) Sandboxes() map[string]Sandbox {
	out := map[string]Sandbox{}
	for name, raw := range f.read().Sandboxes {
		var sb Sandbox
		if err := json.Unmarshal(raw, &sb); err != nil {
			f.t.Fatal(err)
		}
		out[name] = sb
	}
	return out
}

// ExitVM makes the sandbox named name stop by itself, as a microVM whose
// Runtime exited.
func (f *Fixture) ExitVM(name string) {
	f.update(func(st *state) {
		var sb map[string]any
		if err := json.Unmarshal(st.Sandboxes[name], &sb); err != nil {
			f.t.Fatal(err)
		}
		sb["status"] = "Stopped"
		st.Sandboxes[name], _ = json.Marshal(sb)
	})
}

// PutImage makes the fixture hold an image reference with digest.
func (f *Fixture) PutImage(reference, digest string) {
	f.update(func(st *state) { st.Images[reference] = digest })
}
