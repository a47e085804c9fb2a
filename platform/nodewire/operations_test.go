package nodewire

import (
	"errors"
	"slices"
	"strings"
	"testing"

	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

func TestCarriedOperationsAgainstInventoryAndService(t *testing.T) {
	carriedOps := CarriedOperations()
	if len(carriedOps) != 19 {
		t.Fatalf("%d carried operations, want 19", len(carriedOps))
	}
	notCarried := []providercontract.Operation{sandbox.OpObserveBatch, sandbox.OpDiscoverSelection, sandbox.OpVerifyCredential}
	var all []providercontract.Operation
	for _, c := range sandbox.Inventory() {
		for _, op := range c.Methods {
			all = append(all, op)
			kinds := 0
			for _, is := range []func(providercontract.Operation) bool{IsMutation, IsCommand, IsRead} {
				if is(op) {
					kinds++
				}
			}
			switch {
			case slices.Contains(carriedOps, op) && kinds != 1:
				t.Errorf("carried %s is in %d kinds, want exactly 1", op, kinds)
			case !slices.Contains(carriedOps, op) && !slices.Contains(notCarried, op):
				t.Errorf("inventory operation %s is neither carried nor declared not carried", op)
			case !slices.Contains(carriedOps, op) && kinds != 0:
				t.Errorf("%s is not carried but classified", op)
			}
		}
	}
	for _, op := range carriedOps {
		if !slices.Contains(all, op) {
			t.Errorf("carried %s is not an inventory operation", op)
		}
	}
	if got := len(all) - len(notCarried); got != len(carriedOps) {
		t.Errorf("inventory has %d operations besides the uncarried ones, %d carried", got, len(carriedOps))
	}

	// Every carried operation is exactly one NodeService RPC, besides
	// Hello, ServeGenerations, Connect and ObserveBatch (the protocol's
	// batched GetInfo, not the adapters' usage ObserveBatch).
	var rpcs []providercontract.Operation
	for _, m := range pb.NodeService_ServiceDesc.Methods {
		if m.MethodName != "Hello" && m.MethodName != "ServeGenerations" && m.MethodName != "ObserveBatch" {
			rpcs = append(rpcs, providercontract.Operation(m.MethodName))
		}
	}
	// The streams are Connect and a fork seed's two halves.
	for _, s := range pb.NodeService_ServiceDesc.Streams {
		switch s.StreamName {
		case "Connect":
		case "ExportSnapshot", "ImportSnapshot":
			rpcs = append(rpcs, providercontract.Operation(s.StreamName))
		default:
			t.Errorf("unexpected stream %s", s.StreamName)
		}
	}
	slices.Sort(rpcs)
	carriedOps = slices.Clone(carriedOps)
	slices.Sort(carriedOps)
	if !slices.Equal(rpcs, carriedOps) {
		t.Errorf("NodeService RPCs %v differ from carried operations %v", rpcs, carriedOps)
	}

	// The classification the protocol's recovery rules rely on.
	for _, op := range []providercontract.Operation{sandbox.OpCreate, sandbox.OpRenew, sandbox.OpKill, sandbox.OpSuspend,
		sandbox.OpCapture, sandbox.OpCreateSeeded, sandbox.OpImportSnapshot, sandbox.OpResume, sandbox.OpResumeCompute,
		sandbox.OpKillCompute, sandbox.OpDeleteSnapshot} {
		if !IsMutation(op) || !errdefs.IsComputeUnconfirmed(UnknownOutcome(op)) {
			t.Errorf("%s is not a mutation", op)
		}
	}
	for _, op := range []providercontract.Operation{sandbox.OpRunCommand, sandbox.OpRunCommandCompute} {
		if !IsCommand(op) || !errdefs.IsCommandUnconfirmed(UnknownOutcome(op)) {
			t.Errorf("%s is not a command", op)
		}
	}
	for _, op := range []providercontract.Operation{sandbox.OpGetInfo, sandbox.OpObserve, sandbox.OpGetCompute,
		sandbox.OpInitial, sandbox.OpNewCompute} {
		if !IsRead(op) || !errdefs.IsObservationUnavailable(UnknownOutcome(op)) {
			t.Errorf("%s is not a read", op)
		}
	}
	for _, op := range append(notCarried, "", "Hello") {
		if !errdefs.IsComputeUnconfirmed(UnknownOutcome(op)) {
			t.Errorf("uncarried %q: unknown outcome is not compute_unconfirmed", op)
		}
	}
	c := CarriedOperations()
	c[0] = "changed"
	if CarriedOperations()[0] != sandbox.OpCreate {
		t.Fatalf("CarriedOperations shares its slice")
	}
}

func allSupported() providercontract.Operations {
	decl := providercontract.Operations{}
	for _, c := range sandbox.Inventory() {
		for _, op := range c.Methods {
			decl[op] = providercontract.Supported()
		}
	}
	return decl
}

func TestOperationsRoundTrip(t *testing.T) {
	full := allSupported()
	noCheckpoint := allSupported()
	for _, op := range []providercontract.Operation{sandbox.OpInitial, sandbox.OpNewCompute, sandbox.OpGetCompute,
		sandbox.OpSuspend, sandbox.OpCapture, sandbox.OpCreateSeeded, sandbox.OpExportSnapshot, sandbox.OpImportSnapshot, sandbox.OpResume,
		sandbox.OpResumeCompute, sandbox.OpKillCompute, sandbox.OpDeleteSnapshot, sandbox.OpRunCommandCompute} {
		noCheckpoint[op] = providercontract.Unsupported("no_native_checkpoint")
	}
	noCheckpoint[sandbox.OpObserveBatch] = providercontract.Unsupported("no_batch_api")
	noCheckpoint[sandbox.OpVerifyCredential] = providercontract.Unsupported("no_credential")
	for _, decl := range []providercontract.Operations{full, noCheckpoint} {
		m, err := OperationsToWire(decl)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.IsSortedFunc(m, func(a, b *pb.OperationDecision) int {
			return strings.Compare(a.GetOperation(), b.GetOperation())
		}) {
			t.Fatalf("declaration not sorted")
		}
		resp := wire(t, &pb.HelloResponse{Operations: m})
		got, err := OperationsFromWire(resp.GetOperations())
		if err != nil || !got.Equal(decl) {
			t.Fatalf("round trip: %v, %v", got, err)
		}
	}

	// A node agent older than Capture, or than CreateSeeded, declares
	// none: each missing one takes Suspend's decision, supported or not,
	// and nothing else changes.
	for i, decl := range []providercontract.Operations{full, noCheckpoint, full, noCheckpoint} {
		old := decl.Clone()
		delete(old, sandbox.OpCreateSeeded)
		delete(old, sandbox.OpExportSnapshot)
		delete(old, sandbox.OpImportSnapshot)
		if i < 2 {
			delete(old, sandbox.OpCapture)
		}
		var m []*pb.OperationDecision
		for _, op := range old.Sorted() {
			d := old[op]
			m = append(m, &pb.OperationDecision{Operation: string(op), Supported: d.State == providercontract.StateSupported, Reason: string(d.Reason)})
		}
		got, err := OperationsFromWire(wire(t, &pb.HelloResponse{Operations: m}).GetOperations())
		if err != nil || !got.Equal(decl) {
			t.Fatalf("an agent older than the fork operations (case %d): %v, %v", i, got, err)
		}
	}

	// A declaration that breaks the contract is not sent...
	broken := full.Clone()
	delete(broken, sandbox.OpKill)
	if _, err := OperationsToWire(broken); !errdefs.IsContract(err) {
		t.Fatalf("incomplete declaration sent: %v", err)
	}
	// ...and not accepted.
	valid, _ := OperationsToWire(full)
	mut := func(f func([]*pb.OperationDecision) []*pb.OperationDecision) []*pb.OperationDecision {
		c := make([]*pb.OperationDecision, len(valid))
		for i, d := range valid {
			c[i] = &pb.OperationDecision{Operation: d.Operation, Supported: d.Supported, Reason: d.Reason}
		}
		return f(c)
	}
	idx := func(ds []*pb.OperationDecision, op providercontract.Operation) int {
		return slices.IndexFunc(ds, func(d *pb.OperationDecision) bool { return d.Operation == string(op) })
	}
	cases := []struct {
		name     string
		m        []*pb.OperationDecision
		field    string
		contract providercontract.ContractCode
	}{
		{"empty", nil, "operations", providercontract.CodeDeclarationMissing},
		{"nil entry", mut(func(d []*pb.OperationDecision) []*pb.OperationDecision { return append(d, nil) }), "operations", ""},
		{"duplicate", mut(func(d []*pb.OperationDecision) []*pb.OperationDecision { return append(d, d[0]) }), "operations.operation", ""},
		{"supported with reason", mut(func(d []*pb.OperationDecision) []*pb.OperationDecision {
			d[0].Reason = "why_not"
			return d
		}), "operations.reason", ""},
		{"missing", mut(func(d []*pb.OperationDecision) []*pb.OperationDecision {
			i := idx(d, sandbox.OpKill)
			return slices.Delete(d, i, i+1)
		}), "operations", providercontract.CodeOperationUndeclared},
		{"unknown name", mut(func(d []*pb.OperationDecision) []*pb.OperationDecision {
			return append(d, &pb.OperationDecision{Operation: "Teleport /etc/passwd", Supported: true})
		}), "operations", providercontract.CodeOperationUnknown},
		{"required unsupported", mut(func(d []*pb.OperationDecision) []*pb.OperationDecision {
			d[idx(d, sandbox.OpCreate)] = &pb.OperationDecision{Operation: "Create", Reason: "nope_not_here"}
			return d
		}), "operations", providercontract.CodeRequiredUnsupported},
		{"unsafe reason", mut(func(d []*pb.OperationDecision) []*pb.OperationDecision {
			d[idx(d, sandbox.OpVerifyCredential)] = &pb.OperationDecision{Operation: "VerifyCredential", Reason: "Token abc123!"}
			return d
		}), "operations", providercontract.CodeReasonUnsafe},
		{"missing reason", mut(func(d []*pb.OperationDecision) []*pb.OperationDecision {
			d[idx(d, sandbox.OpVerifyCredential)] = &pb.OperationDecision{Operation: "VerifyCredential"}
			return d
		}), "operations", providercontract.CodeReasonMissing},
		{"mixed checkpoint", mut(func(d []*pb.OperationDecision) []*pb.OperationDecision {
			d[idx(d, sandbox.OpSuspend)] = &pb.OperationDecision{Operation: "Suspend", Reason: "no_native_checkpoint"}
			return d
		}), "operations", providercontract.CodeDecisionsMixed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := OperationsFromWire(c.m)
			wantField(t, err, c.field, "Teleport", "/etc/passwd", "abc123")
			if c.contract != "" && providercontract.CodeOf(err) != c.contract {
				t.Fatalf("contract code %q, want %q", providercontract.CodeOf(err), c.contract)
			}
		})
	}
}

func TestMalformedResponseIsUnknownOutcome(t *testing.T) {
	_, ferr := InfoFromWire(&pb.Info{State: pb.State(99)})
	for op, is := range map[providercontract.Operation]func(error) bool{
		sandbox.OpCreate:     errdefs.IsComputeUnconfirmed,
		sandbox.OpRunCommand: errdefs.IsCommandUnconfirmed,
		sandbox.OpGetInfo:    errdefs.IsObservationUnavailable,
	} {
		err := MalformedResponse(op, ferr)
		if !is(err) || errdefs.IsInvalid(err) {
			t.Errorf("%s: %v", op, err)
		}
		var e *Error
		if !errors.As(err, &e) || e.Operation != op || e.Code != "" {
			t.Errorf("%s: not a node Error: %#v", op, err)
		}
	}
}
