package sandbox_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

var ref = sandbox.Reference{
	TenantID:      "1f0e6a52-0c1e-4b8a-9a53-6c1f3f0d2a10",
	EnvironmentID: "2a7c9d1e-5b3f-4e6a-8c2d-9e0f1a2b3c4d",
	AllocationID:  "3b8d0e2f-6c4a-4f7b-9d3e-0f1a2b3c4d5e",
}

func TestReferenceValidate(t *testing.T) {
	if err := ref.Validate(); err != nil {
		t.Fatalf("valid reference: %v", err)
	}
	cases := map[string]func(*sandbox.Reference){
		"empty tenant":          func(r *sandbox.Reference) { r.TenantID = "" },
		"upper-case env":        func(r *sandbox.Reference) { r.EnvironmentID = strings.ToUpper(r.EnvironmentID) },
		"urn allocation":        func(r *sandbox.Reference) { r.AllocationID = "urn:uuid:" + r.AllocationID },
		"allocation is the env": func(r *sandbox.Reference) { r.AllocationID = r.EnvironmentID },
		"bare native id":        func(r *sandbox.Reference) { r.AllocationID = "c0ffee" },
	}
	for name, mutate := range cases {
		r := ref
		mutate(&r)
		err := r.Validate()
		if _, ok := errdefs.Field(err); !ok || !errdefs.IsInvalid(err) {
			t.Errorf("%s: err = %v, want a field error", name, err)
		}
	}
}

func TestInfoReceiptsAndConsistency(t *testing.T) {
	receipt := sandbox.Info{Reference: ref, State: sandbox.StateAbsent, CreateSettled: true}
	if !receipt.IsAbsenceReceipt(ref) || receipt.CheckFor(ref) != nil {
		t.Fatal("explicit absence receipt not recognised")
	}
	other := ref
	other.AllocationID = "4c9e1f3a-7d5b-4a8c-8e4f-1a2b3c4d5e6f"
	notReceipts := map[string]sandbox.Info{
		"other reference": {Reference: other, State: sandbox.StateAbsent, CreateSettled: true},
		"not settled":     {Reference: ref, State: sandbox.StateAbsent},
		"native id":       {Reference: ref, State: sandbox.StateAbsent, CreateSettled: true, ProviderID: "x"},
		"zero info":       {},
		"running":         {Reference: ref, State: sandbox.StateRunning, CreateSettled: true, ProviderID: "x"},
	}
	for name, info := range notReceipts {
		if info.IsAbsenceReceipt(ref) {
			t.Errorf("%s taken as an absence receipt", name)
		}
	}
	running := sandbox.Info{Reference: ref, State: sandbox.StateRunning, ProviderID: "c1", BootstrapComplete: true}
	if !running.IsSettledRunning(ref) {
		t.Error("running with bootstrap not settled")
	}
	if (sandbox.Info{Reference: ref, State: sandbox.StateRunning, ProviderID: "c1"}).IsSettledRunning(ref) {
		t.Error("running without a completed bootstrap counted as settled")
	}
	contradictory := map[string]sandbox.Info{
		"other reference":          {Reference: other, State: sandbox.StateRunning},
		"absent with native id":    {Reference: ref, State: sandbox.StateAbsent, ProviderID: "c1"},
		"bootstrap without native": {Reference: ref, State: sandbox.StateCreated, BootstrapComplete: true},
		"unknown state":            {Reference: ref, State: "exploded"},
	}
	for name, info := range contradictory {
		if err := info.CheckFor(ref); !errdefs.IsInvalid(err) {
			t.Errorf("%s: CheckFor = %v", name, err)
		}
	}
}

func TestCommandValidateAndRedaction(t *testing.T) {
	ok := sandbox.Command{Args: []string{"sh", "-c", "true"}, Directory: "/workspace", Stdin: []byte("s3cr3t-token")}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid command: %v", err)
	}
	for _, out := range []string{fmt.Sprint(ok), fmt.Sprintf("%v %+v %#v %s", ok, ok, ok, ok)} {
		if strings.Contains(out, "s3cr3t-token") {
			t.Fatalf("stdin formatted: %s", out)
		}
	}
	bad := map[string]sandbox.Command{
		"no args":        {},
		"empty program":  {Args: []string{""}},
		"nul in arg":     {Args: []string{"echo", "a\x00b"}},
		"too many args":  {Args: make([]string, sandbox.MaxCommandArgs+1)},
		"args too long":  {Args: []string{"echo", strings.Repeat("a", sandbox.MaxCommandArgsBytes)}},
		"relative dir":   {Args: []string{"true"}, Directory: "workspace"},
		"unclean dir":    {Args: []string{"true"}, Directory: "/workspace/../etc"},
		"stdin too big":  {Args: []string{"cat"}, Stdin: make([]byte, sandbox.MaxCommandStdin+1)},
		"negative limit": {Args: []string{"true"}, OutputLimit: -1},
		"limit too big":  {Args: []string{"true"}, OutputLimit: sandbox.MaxOutputLimit + 1},
	}
	bad["too many args"].Args[0] = "x"
	for name, c := range bad {
		if err := c.Validate(); !errdefs.IsInvalid(err) {
			t.Errorf("%s: Validate = %v", name, err)
		}
	}
	if (sandbox.Command{}).Limit() != sandbox.DefaultOutputLimit || (sandbox.Command{OutputLimit: 10}).Limit() != 10 {
		t.Error("Limit")
	}
}

func TestSpecificationBounds(t *testing.T) {
	spec := sandbox.Specification{
		Resources: sandbox.Resources{CPUMillis: 1000, MemoryBytes: 1 << 30, DiskBytes: 10 << 30},
		MaxActive: 8, MaxRetained: 16,
		Suspension: sandbox.SuspensionPolicy{Idle: 10 * time.Minute, Retention: 24 * time.Hour},
	}
	if err := spec.Validate(); err != nil {
		t.Fatalf("valid spec: %v", err)
	}
	cases := map[string]func(*sandbox.Specification){
		"cpu low":              func(s *sandbox.Specification) { s.Resources.CPUMillis = 10 },
		"memory high":          func(s *sandbox.Specification) { s.Resources.MemoryBytes = sandbox.MaxMemoryBytes + 1 },
		"disk low":             func(s *sandbox.Specification) { s.Resources.DiskBytes = 0 },
		"max active zero":      func(s *sandbox.Specification) { s.MaxActive = 0 },
		"max retained neg":     func(s *sandbox.Specification) { s.MaxRetained = -1 },
		"idle fractional":      func(s *sandbox.Specification) { s.Suspension.Idle = 10*time.Minute + time.Millisecond },
		"retention too long":   func(s *sandbox.Specification) { s.Suspension.Retention = sandbox.MaxRetention + time.Hour },
		"idle without retains": func(s *sandbox.Specification) { s.Suspension.Retention = 0 },
	}
	for name, mutate := range cases {
		s := spec
		mutate(&s)
		if err := s.Validate(); !errdefs.IsInvalid(err) {
			t.Errorf("%s: Validate = %v", name, err)
		}
	}
	spec.Suspension = sandbox.SuspensionPolicy{}
	if err := spec.Validate(); err != nil {
		t.Errorf("no suspension: %v", err)
	}
}
