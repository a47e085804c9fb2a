package nodewire

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"testing/quick"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"berth.dev/platform/nodetls"
	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// wire sends m through the real encoding, so round trips see what a peer
// sees (for example empty repeated fields and bytes arriving as nil).
func wire[M proto.Message](t *testing.T, m M) M {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	out := m.ProtoReflect().New().Interface().(M)
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	return out
}

var quickConfig = &quick.Config{MaxCount: 300}

// property runs check for quick's random seeds and reports the failing one.
func property(t *testing.T, check func(t *testing.T, g gen) bool) {
	t.Helper()
	if err := quick.Check(func(seed int64) bool { return check(t, newGen(seed)) }, quickConfig); err != nil {
		t.Fatal(err)
	}
}

// wantField asserts err is an ErrInvalid FieldError naming field, and that
// its text echoes none of the submitted values.
func wantField(t *testing.T, err error, field string, submitted ...string) {
	t.Helper()
	if !errdefs.IsInvalid(err) {
		t.Fatalf("error %v is not ErrInvalid", err)
	}
	got, ok := errdefs.Field(err)
	if !ok || got != field {
		t.Fatalf("field = %q (%v), want %q (error %v)", got, ok, field, err)
	}
	for _, s := range submitted {
		if s != "" && strings.Contains(err.Error(), s) {
			t.Fatalf("error %q echoes submitted value %q", err, s)
		}
	}
}

func TestReferenceRoundTripAndRejections(t *testing.T) {
	g := newGen(1)
	ref := g.ref()
	got, err := ReferenceFromWire(wire(t, ReferenceToWire(ref)))
	if err != nil || got != ref {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if ReferenceToWire(sandbox.Reference{}) != nil {
		t.Fatalf("zero reference should be unset")
	}
	valid := ReferenceToWire(ref)
	bad := func(f func(m *pb.Reference)) *pb.Reference {
		m := proto.Clone(valid).(*pb.Reference)
		f(m)
		return m
	}
	cases := []struct {
		name  string
		m     *pb.Reference
		field string
		value string
	}{
		{"nil", nil, "reference", ""},
		{"tenant", bad(func(m *pb.Reference) { m.TenantId = "TENANT-secret" }), "reference.tenant_id", "TENANT-secret"},
		{"environment upper", bad(func(m *pb.Reference) { m.EnvironmentId = strings.ToUpper(m.EnvironmentId) }), "reference.environment_id", ""},
		{"allocation empty", bad(func(m *pb.Reference) { m.AllocationId = "" }), "reference.allocation_id", ""},
		{"allocation is environment", bad(func(m *pb.Reference) { m.AllocationId = m.EnvironmentId }), "reference.allocation_id", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReferenceFromWire(c.m)
			wantField(t, err, c.field, c.value)
		})
	}
	// Nested references carry the full path.
	_, err = ComputeFromWire(&pb.Compute{Reference: bad(func(m *pb.Reference) { m.TenantId = "x" })})
	wantField(t, err, "compute.reference.tenant_id", "")
	_, err = NewComputeRequestFromWire(&pb.NewComputeRequest{Previous: &pb.Compute{}})
	wantField(t, err, "previous.reference", "")
}

func TestInfoTable(t *testing.T) {
	g := newGen(2)
	ref := g.ref()
	lease := time.Date(2031, 5, 6, 7, 8, 9, 10, time.UTC)
	for _, i := range []sandbox.Info{
		{},
		{Reference: ref},
		{Reference: ref, State: sandbox.StateAbsent, CreateSettled: true},
		{Reference: ref, ProviderID: "c0ffee", State: sandbox.StateRunning, BootstrapComplete: true, CreateSettled: true, LeaseExpiry: lease},
		{Reference: ref, ProviderID: "c0ffee", State: sandbox.StateStopped},
		{Reference: ref, ProviderID: "c0ffee", State: sandbox.StatePaused},
		{Reference: ref, ProviderID: "c0ffee", State: sandbox.StateCreated},
	} {
		m, err := InfoToWire(i)
		if err != nil {
			t.Fatalf("InfoToWire(%+v): %v", i, err)
		}
		got, err := InfoFromWire(wire(t, m))
		if err != nil || !reflect.DeepEqual(got, i) {
			t.Fatalf("round trip of %+v: %+v, %v", i, got, err)
		}
	}
	if m, _ := InfoToWire(sandbox.Info{}); m.GetReference() != nil || m.GetState() != pb.State_STATE_UNSPECIFIED || m.GetLeaseExpiry() != nil {
		t.Fatalf("zero info should be an empty message: %v", m)
	}
	if m, _ := InfoToWire(sandbox.Info{Reference: ref}); m.GetLeaseExpiry() != nil {
		t.Fatalf("zero lease expiry should be unset")
	}

	refm := ReferenceToWire(ref)
	rejects := []struct {
		name  string
		m     *pb.Info
		field string
	}{
		{"nil", nil, "info"},
		{"unknown state", &pb.Info{Reference: refm, State: pb.State(42)}, "info.state"},
		{"negative state", &pb.Info{Reference: refm, State: pb.State(-1)}, "info.state"},
		{"bad reference", &pb.Info{Reference: &pb.Reference{TenantId: "t"}, State: pb.State_STATE_RUNNING}, "info.reference.tenant_id"},
		{"observation without reference", &pb.Info{ProviderId: "c0ffee", State: pb.State_STATE_RUNNING}, "info.reference"},
		{"absent with native id", &pb.Info{Reference: refm, ProviderId: "c0ffee", State: pb.State_STATE_ABSENT}, "info.state"},
		{"bootstrap without native id", &pb.Info{Reference: refm, State: pb.State_STATE_RUNNING, BootstrapComplete: true}, "info.bootstrap_complete"},
		{"invalid timestamp", &pb.Info{Reference: refm, LeaseExpiry: &timestamppb.Timestamp{Seconds: math.MaxInt64}}, "info.lease_expiry"},
		{"invalid nanos", &pb.Info{Reference: refm, LeaseExpiry: &timestamppb.Timestamp{Nanos: -1}}, "info.lease_expiry"},
	}
	for _, c := range rejects {
		t.Run(c.name, func(t *testing.T) {
			_, err := InfoFromWire(c.m)
			wantField(t, err, c.field, "c0ffee")
		})
	}

	// Results a provider must not return fail with ErrContract.
	for _, i := range []sandbox.Info{
		{Reference: ref, State: "sleeping"},
		{ProviderID: "c0ffee"},
		{Reference: ref, State: sandbox.StateAbsent, ProviderID: "c0ffee"},
		{Reference: sandbox.Reference{TenantID: "t"}},
		{Reference: ref, LeaseExpiry: time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		if _, err := InfoToWire(i); !errdefs.IsContract(err) || errdefs.IsInvalid(err) {
			t.Errorf("InfoToWire(%+v) = %v, want ErrContract", i, err)
		}
	}
}

func TestInfoProperty(t *testing.T) {
	property(t, func(t *testing.T, g gen) bool {
		i := g.info()
		m, err := InfoToWire(i)
		if err != nil {
			t.Logf("valid info rejected: %+v: %v", i, err)
			return false
		}
		got, err := InfoFromWire(wire(t, m))
		return err == nil && reflect.DeepEqual(got, i)
	})
	// Whatever ToWire accepts, FromWire accepts unchanged.
	property(t, func(t *testing.T, g gen) bool {
		i := g.wildInfo()
		m, err := InfoToWire(i)
		if err != nil {
			return errdefs.IsContract(err)
		}
		got, err := InfoFromWire(wire(t, m))
		return err == nil && got.Reference == i.Reference && got.State == i.State &&
			got.LeaseExpiry.Equal(i.LeaseExpiry) && got.ProviderID == i.ProviderID
	})
}

func TestResourcesAndBootstrapAndCreateRequest(t *testing.T) {
	g := newGen(3)
	req := g.createRequest()
	m, err := CreateRequestToWire(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := CreateRequestFromWire(wire(t, m))
	if err != nil || !reflect.DeepEqual(got, req) {
		t.Fatalf("round trip: %v", err)
	}
	if got.Bootstrap.Credential.Reveal() != req.Bootstrap.Credential.Reveal() {
		t.Fatalf("credential lost")
	}

	secret := req.Bootstrap.Credential.Reveal()
	mut := func(f func(m *pb.CreateRequest)) *pb.CreateRequest {
		c := proto.Clone(m).(*pb.CreateRequest)
		f(c)
		return c
	}
	cases := []struct {
		name  string
		m     *pb.CreateRequest
		field string
	}{
		{"nil", nil, "request"},
		{"no reference", mut(func(c *pb.CreateRequest) { c.Reference = nil }), "reference"},
		{"bad reference", mut(func(c *pb.CreateRequest) { c.Reference.AllocationId = c.Reference.EnvironmentId }), "reference.allocation_id"},
		{"no resources", mut(func(c *pb.CreateRequest) { c.Resources = nil }), "resources"},
		{"cpu", mut(func(c *pb.CreateRequest) { c.Resources.CpuMillis = -5 }), "resources.cpu_millis"},
		{"memory", mut(func(c *pb.CreateRequest) { c.Resources.MemoryBytes = math.MaxInt64 }), "resources.memory_bytes"},
		{"disk", mut(func(c *pb.CreateRequest) { c.Resources.DiskBytes = 0 }), "resources.disk_bytes"},
		{"no bootstrap", mut(func(c *pb.CreateRequest) { c.Bootstrap = nil }), "bootstrap"},
		{"version", mut(func(c *pb.CreateRequest) { c.Bootstrap.Version = math.MaxInt32 }), "bootstrap"},
		{"short credential", mut(func(c *pb.CreateRequest) { c.Bootstrap.Credential = secret[:8] }), "bootstrap"},
		{"credential whitespace", mut(func(c *pb.CreateRequest) { c.Bootstrap.Credential = secret + " x" }), "bootstrap"},
		{"url", mut(func(c *pb.CreateRequest) { c.Bootstrap.CoreUrl = "ftp://user:" + secret + "@h" }), "bootstrap"},
		{"core ca not pem", mut(func(c *pb.CreateRequest) { c.CoreCaPem = []byte(secret) }), "core_ca_pem"},
		{"core ca not a certificate", mut(func(c *pb.CreateRequest) {
			c.CoreCaPem = []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
		}), "core_ca_pem"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := CreateRequestFromWire(c.m)
			wantField(t, err, c.field, secret, secret[:8])
		})
	}

	// The CA for the Runtime crosses as given.
	ca, err := nodetls.NewCA(uuid.NewString(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	withCA := req
	withCA.CoreCA = ca.CertificatePEM()
	m, err = CreateRequestToWire(withCA)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := CreateRequestFromWire(wire(t, m)); err != nil || !reflect.DeepEqual(got, withCA) {
		t.Fatalf("round trip with a CA: %v", err)
	}

	// A value the wire cannot carry is refused on the way out.
	bad := req
	bad.Bootstrap.Version = math.MaxInt32 + 1
	if _, err := CreateRequestToWire(bad); !errdefs.IsInvalid(err) {
		t.Fatalf("version beyond int32 sent: %v", err)
	}
	if _, err := BootstrapToWire(bad.Bootstrap); !errdefs.IsInvalid(err) {
		t.Fatalf("BootstrapToWire accepted a bad version: %v", err)
	}
	// An invalid request is validated where it leaves the wire (the
	// sender's caller validated it before dispatch; ToWire converts only).
	bad = req
	bad.Resources.CPUMillis = 0
	m, err = CreateRequestToWire(bad)
	if err != nil {
		t.Fatalf("ToWire validates: %v", err)
	}
	if _, err := CreateRequestFromWire(wire(t, m)); !errdefs.IsInvalid(err) {
		t.Fatalf("bad resources accepted from the wire: %v", err)
	}

	property(t, func(t *testing.T, g gen) bool {
		req := g.createRequest()
		m, err := CreateRequestToWire(req)
		if err != nil {
			return false
		}
		got, err := CreateRequestFromWire(wire(t, m))
		if err != nil || !reflect.DeepEqual(got, req) {
			return false
		}
		r, err := ResourcesFromWire(wire(t, ResourcesToWire(req.Resources)))
		if err != nil || r != req.Resources {
			return false
		}
		b, err := BootstrapToWire(req.Bootstrap)
		if err != nil {
			return false
		}
		f, err := BootstrapFromWire(wire(t, b))
		return err == nil && reflect.DeepEqual(f, req.Bootstrap)
	})
}

func TestCommand(t *testing.T) {
	g := newGen(4)
	for _, c := range []sandbox.Command{
		{Args: []string{"true"}},
		{Args: []string{"sh", "-c", "echo hi"}, Directory: "/workspace", Stdin: []byte("secret"), OutputLimit: sandbox.MaxOutputLimit},
		g.command(),
	} {
		m, err := CommandToWire(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := CommandFromWire(wire(t, m))
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Fatalf("round trip of %v: %v, %v", c, got, err)
		}
	}
	cases := []struct {
		name  string
		m     *pb.Command
		field string
	}{
		{"nil", nil, "command"},
		{"no args", &pb.Command{}, "command.args"},
		{"negative limit", &pb.Command{Args: []string{"true"}, OutputLimit: -1}, "command.output_limit"},
		{"limit too large", &pb.Command{Args: []string{"true"}, OutputLimit: math.MaxInt32}, "command.output_limit"},
		{"relative directory", &pb.Command{Args: []string{"true"}, Directory: "home/secret"}, "command.directory"},
		{"stdin too large", &pb.Command{Args: []string{"true"}, Stdin: make([]byte, sandbox.MaxCommandStdin+1)}, "command.stdin"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := CommandFromWire(c.m)
			wantField(t, err, c.field, "home/secret")
		})
	}
	property(t, func(t *testing.T, g gen) bool {
		c := g.wildCommand()
		m, err := CommandToWire(c)
		if err != nil {
			return errdefs.IsInvalid(err) && c.Validate() != nil
		}
		got, err := CommandFromWire(wire(t, m))
		return err == nil && reflect.DeepEqual(got, c)
	})
}

func TestCommandResult(t *testing.T) {
	for _, r := range []sandbox.CommandResult{
		{},
		{Stdout: []byte("out"), Stderr: []byte("err"), StdoutTruncated: true, ExitCode: 137},
		{ExitCode: -1, StderrTruncated: true},
		{ExitCode: math.MinInt32},
		{ExitCode: math.MaxInt32},
	} {
		m, err := CommandResultToWire(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := CommandResultFromWire(wire(t, m))
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip of %+v: %+v, %v", r, got, err)
		}
	}
	for _, r := range []sandbox.CommandResult{
		{ExitCode: math.MaxInt32 + 1},
		{ExitCode: math.MinInt32 - 1},
		{Stdout: make([]byte, sandbox.MaxOutputLimit+1)},
	} {
		if _, err := CommandResultToWire(r); !errdefs.IsContract(err) {
			t.Errorf("CommandResultToWire(exit %d) = %v, want ErrContract", r.ExitCode, err)
		}
	}
	_, err := CommandResultFromWire(nil)
	wantField(t, err, "result")
	_, err = CommandResultFromWire(&pb.CommandResult{Stderr: make([]byte, sandbox.MaxOutputLimit+1)})
	wantField(t, err, "result.stderr")
	property(t, func(t *testing.T, g gen) bool {
		r := g.wildCommandResult()
		m, err := CommandResultToWire(r)
		if err != nil {
			return errdefs.IsContract(err) && !fitsInt32(r.ExitCode)
		}
		got, err := CommandResultFromWire(wire(t, m))
		return err == nil && reflect.DeepEqual(got, r)
	})
}

func TestObservation(t *testing.T) {
	property(t, func(t *testing.T, g gen) bool {
		o := g.observation()
		m, err := ObservationToWire(o)
		if err != nil {
			return false
		}
		got, err := ObservationFromWire(wire(t, m))
		return err == nil && got == o
	})
	if _, err := ObservationToWire(sandbox.Observation{}); !errdefs.IsContract(err) {
		t.Fatalf("observation without reference: %v", err)
	}
	_, err := ObservationFromWire(nil)
	wantField(t, err, "response")
	_, err = ObservationFromWire(&pb.ObserveResponse{Pids: 3})
	wantField(t, err, "reference")
}

func TestCheckpointValues(t *testing.T) {
	g := newGen(5)
	c := g.compute()
	got, err := ComputeFromWire(wire(t, ComputeToWire(c)))
	if err != nil || got != c {
		t.Fatalf("compute round trip: %+v, %v", got, err)
	}
	if ComputeToWire(sandbox.Compute{}) != nil {
		t.Fatalf("zero compute should be unset")
	}
	prev, err := NewComputeRequestFromWire(wire(t, NewComputeRequestToWire(c)))
	if err != nil || prev != c {
		t.Fatalf("new compute round trip: %+v, %v", prev, err)
	}

	// ComputeInfo: compute and a specified, known state are required.
	cm := ComputeToWire(c)
	ciCases := []struct {
		name  string
		m     *pb.ComputeInfo
		field string
	}{
		{"nil", nil, "info"},
		{"no compute", &pb.ComputeInfo{State: pb.ComputeState_COMPUTE_STATE_RUNNING}, "info.compute"},
		{"unspecified", &pb.ComputeInfo{Compute: cm}, "info.state"},
		{"unknown", &pb.ComputeInfo{Compute: cm, State: pb.ComputeState(9)}, "info.state"},
	}
	for _, tc := range ciCases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ComputeInfoFromWire(tc.m)
			wantField(t, err, tc.field)
		})
	}
	for _, ci := range []sandbox.ComputeInfo{{}, {Compute: c}, {Compute: c, State: "frozen"}, {Compute: sandbox.Compute{Name: "n"}, State: sandbox.ComputeRunning}} {
		if _, err := ComputeInfoToWire(ci); !errdefs.IsContract(err) {
			t.Errorf("ComputeInfoToWire(%+v) = %v, want ErrContract", ci, err)
		}
	}

	// Snapshots need an id.
	_, err = SnapshotFromWire(&pb.SnapshotIdentity{Provenance: "p"})
	wantField(t, err, "snapshot.id")
	_, err = SnapshotFromWire(nil)
	wantField(t, err, "snapshot")

	// Suspend and resume requests.
	_, err = SuspendRequestFromWire(&pb.SuspendRequest{Compute: cm})
	wantField(t, err, "operation_id")
	_, err = SuspendRequestFromWire(&pb.SuspendRequest{OperationId: "op"})
	wantField(t, err, "compute")
	_, err = CaptureRequestFromWire(&pb.CaptureRequest{Compute: cm})
	wantField(t, err, "operation_id")
	_, err = CaptureRequestFromWire(&pb.CaptureRequest{OperationId: "op"})
	wantField(t, err, "compute")
	_, err = ResumeRequestFromWire(&pb.ResumeRequest{Snapshot: &pb.SnapshotIdentity{Id: "s"}, OperationId: "op"})
	wantField(t, err, "target")
	_, err = ResumeRequestFromWire(&pb.ResumeRequest{Snapshot: &pb.SnapshotIdentity{Id: "s"}, Target: cm})
	wantField(t, err, "operation_id")
	_, err = ResumeRequestFromWire(&pb.ResumeRequest{Target: cm, OperationId: "op"})
	wantField(t, err, "snapshot")
	for _, f := range []func() error{
		func() error { _, err := SuspendRequestFromWire(nil); return err },
		func() error { _, err := CaptureRequestFromWire(nil); return err },
		func() error { _, err := ResumeRequestFromWire(nil); return err },
		func() error { _, err := NewComputeRequestFromWire(nil); return err },
	} {
		wantField(t, f(), "request")
	}

	// Results.
	_, err = SuspendResultFromWire(&pb.SuspendResponse{Snapshot: &pb.SnapshotIdentity{Id: "s"}})
	wantField(t, err, "source")
	_, err = SuspendResultFromWire(&pb.SuspendResponse{Snapshot: &pb.SnapshotIdentity{Id: "s"}, Source: &pb.ComputeInfo{Compute: cm}})
	wantField(t, err, "source.state")
	_, err = CaptureResultFromWire(&pb.CaptureResponse{Snapshot: &pb.SnapshotIdentity{Id: "s"}})
	wantField(t, err, "source")
	_, err = CaptureResultFromWire(&pb.CaptureResponse{Source: &pb.ComputeInfo{Compute: cm, State: pb.ComputeState_COMPUTE_STATE_RUNNING}})
	wantField(t, err, "snapshot")
	_, err = ResumeResultFromWire(&pb.ResumeResponse{Compute: &pb.ComputeInfo{State: pb.ComputeState_COMPUTE_STATE_PAUSED}})
	wantField(t, err, "compute.compute")
	for _, f := range []func() error{
		func() error { _, err := SuspendResultFromWire(nil); return err },
		func() error { _, err := CaptureResultFromWire(nil); return err },
		func() error { _, err := ResumeResultFromWire(nil); return err },
	} {
		wantField(t, f(), "response")
	}
	if _, err := SuspendResultToWire(sandbox.SuspendResult{Source: g.computeInfo()}); !errdefs.IsContract(err) {
		t.Fatalf("suspend result without snapshot id: %v", err)
	}
	if _, err := CaptureResultToWire(sandbox.CaptureResult{Source: g.computeInfo()}); !errdefs.IsContract(err) {
		t.Fatalf("capture result without snapshot id: %v", err)
	}
	if _, err := ResumeResultToWire(sandbox.ResumeResult{}); !errdefs.IsContract(err) {
		t.Fatalf("empty resume result: %v", err)
	}

	property(t, func(t *testing.T, g gen) bool {
		ci := g.computeInfo()
		m, err := ComputeInfoToWire(ci)
		if err != nil {
			return false
		}
		gotCI, err := ComputeInfoFromWire(wire(t, m))
		if err != nil || gotCI != ci {
			return false
		}
		s := g.snapshot()
		gotS, err := SnapshotFromWire(wire(t, SnapshotToWire(s)))
		if err != nil || gotS != s {
			return false
		}
		sreq := sandbox.SuspendRequest{Compute: g.compute(), OperationID: g.uuid(), ObserveOnly: g.r.Intn(2) == 0}
		gotSReq, err := SuspendRequestFromWire(wire(t, SuspendRequestToWire(sreq)))
		if err != nil || gotSReq != sreq {
			return false
		}
		sres := sandbox.SuspendResult{Snapshot: s, Source: g.computeInfo()}
		sm, err := SuspendResultToWire(sres)
		if err != nil {
			return false
		}
		gotSRes, err := SuspendResultFromWire(wire(t, sm))
		if err != nil || gotSRes != sres {
			return false
		}
		creq := sandbox.CaptureRequest{Compute: g.compute(), OperationID: g.uuid(), ObserveOnly: g.r.Intn(2) == 0}
		gotCReq, err := CaptureRequestFromWire(wire(t, CaptureRequestToWire(creq)))
		if err != nil || gotCReq != creq {
			return false
		}
		cres := sandbox.CaptureResult{Snapshot: s, Source: g.computeInfo()}
		capm, err := CaptureResultToWire(cres)
		if err != nil {
			return false
		}
		gotCRes, err := CaptureResultFromWire(wire(t, capm))
		if err != nil || gotCRes != cres {
			return false
		}
		rreq := sandbox.ResumeRequest{Snapshot: s, Target: g.compute(), OperationID: g.uuid(), ObserveOnly: g.r.Intn(2) == 0}
		if !rreq.ObserveOnly {
			rreq.Resources, rreq.Bootstrap = g.resources(), g.bootstrap()
		}
		rm0, err := ResumeRequestToWire(rreq)
		if err != nil {
			return false
		}
		gotRReq, err := ResumeRequestFromWire(wire(t, rm0))
		if err != nil || !reflect.DeepEqual(gotRReq, rreq) {
			return false
		}
		rres := sandbox.ResumeResult{Compute: g.computeInfo()}
		rm, err := ResumeResultToWire(rres)
		if err != nil {
			return false
		}
		gotRRes, err := ResumeResultFromWire(wire(t, rm))
		return err == nil && gotRRes == rres
	})
	property(t, func(t *testing.T, g gen) bool {
		ci := g.wildComputeInfo()
		m, err := ComputeInfoToWire(ci)
		if err != nil {
			return errdefs.IsContract(err)
		}
		got, err := ComputeInfoFromWire(wire(t, m))
		return err == nil && got == ci
	})
}

// FuzzInfoFromWire feeds arbitrary wire Infos: conversion never panics,
// and whatever it accepts converts back to the same wire form.
func FuzzInfoFromWire(f *testing.F) {
	g := newGen(6)
	r := g.ref()
	f.Add(r.TenantID, r.EnvironmentID, r.AllocationID, "id", int32(3), true, true, int64(1900000000), int32(5))
	f.Add(r.TenantID, r.EnvironmentID, r.EnvironmentID, "", int32(1), false, true, int64(0), int32(0))
	f.Add("", "", "", "", int32(0), false, false, int64(-1), int32(-1))
	f.Add(r.TenantID, r.EnvironmentID, r.AllocationID, "", int32(7), true, false, int64(math.MaxInt64), int32(0))
	f.Fuzz(func(t *testing.T, tenant, env, alloc, id string, state int32, boot, settled bool, sec int64, nanos int32) {
		m := &pb.Info{
			ProviderId: id, State: pb.State(state), BootstrapComplete: boot, CreateSettled: settled,
		}
		if tenant != "" || env != "" || alloc != "" {
			m.Reference = &pb.Reference{TenantId: tenant, EnvironmentId: env, AllocationId: alloc}
		}
		if sec != 0 || nanos != 0 {
			m.LeaseExpiry = &timestamppb.Timestamp{Seconds: sec, Nanos: nanos}
		}
		i, err := InfoFromWire(m)
		if err != nil {
			if _, ok := errdefs.Field(err); !ok {
				t.Fatalf("rejection without a field: %v", err)
			}
			return
		}
		back, err := InfoToWire(i)
		if err != nil {
			t.Fatalf("accepted info does not convert back: %v", err)
		}
		again, err := InfoFromWire(back)
		if err != nil || !reflect.DeepEqual(again, i) {
			t.Fatalf("second round trip: %+v vs %+v, %v", again, i, err)
		}
	})
}

func TestBootstrapCredentialStaysSecret(t *testing.T) {
	g := newGen(7)
	f := g.bootstrap()
	m, err := BootstrapToWire(f)
	if err != nil {
		t.Fatal(err)
	}
	m.Credential = "short"
	_, err = BootstrapFromWire(m)
	if err == nil || strings.Contains(err.Error(), "short") {
		t.Fatalf("rejection echoes the credential: %v", err)
	}
	if !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("rejection is not ErrInvalid: %v", err)
	}
}

// TestCreateRequestFromWireIsValidate: CreateRequestFromWire validates each
// part once as it decodes it, instead of decoding and then running
// sandbox.CreateRequest.Validate over the whole again; together the parts
// must refuse exactly what Validate refuses, with the same field.
func TestCreateRequestFromWireIsValidate(t *testing.T) {
	g := newGen(5)
	for name, mutate := range map[string]func(r *sandbox.CreateRequest){
		"valid":            func(*sandbox.CreateRequest) {},
		"no tenant":        func(r *sandbox.CreateRequest) { r.Reference.TenantID = "" },
		"no environment":   func(r *sandbox.CreateRequest) { r.Reference.EnvironmentID = "" },
		"zero cpu":         func(r *sandbox.CreateRequest) { r.Resources.CPUMillis = 0 },
		"zero memory":      func(r *sandbox.CreateRequest) { r.Resources.MemoryBytes = 0 },
		"bootstrap no url": func(r *sandbox.CreateRequest) { r.Bootstrap.CoreURL = "" },
		"core ca not pem":  func(r *sandbox.CreateRequest) { r.CoreCA = []byte("not a certificate") },
		"core ca truncated": func(r *sandbox.CreateRequest) {
			r.CoreCA = []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
		},
	} {
		t.Run(name, func(t *testing.T) {
			req := g.createRequest()
			mutate(&req)
			want := req.Validate()
			m := &pb.CreateRequest{Reference: ReferenceToWire(req.Reference), Resources: ResourcesToWire(req.Resources),
				Bootstrap: &pb.Bootstrap{Version: int32(req.Bootstrap.Version), CoreUrl: req.Bootstrap.CoreURL,
					DeviceId: req.Bootstrap.DeviceID, Credential: req.Bootstrap.Credential.Reveal()},
				CoreCaPem: req.CoreCA}
			_, got := CreateRequestFromWire(wire(t, m))
			if (want == nil) != (got == nil) {
				t.Fatalf("Validate: %v; CreateRequestFromWire: %v", want, got)
			}
			// The wire names the field by its path in the request.
			if wf, _ := errdefs.Field(want); want != nil && !strings.HasSuffix(fieldOf(got), wf) {
				t.Fatalf("Validate refuses field %q; CreateRequestFromWire: %v", wf, got)
			}
			if name != "valid" && want == nil {
				t.Fatalf("the %q mutation left the request valid", name)
			}
		})
	}
}

func fieldOf(err error) string { f, _ := errdefs.Field(err); return f }
