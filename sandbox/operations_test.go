package sandbox_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/internal/refadapter"
	"berth.dev/sandbox/providercontract"
)

var checkpointOps = []providercontract.Operation{
	sandbox.OpInitial, sandbox.OpNewCompute, sandbox.OpGetCompute, sandbox.OpSuspend, sandbox.OpCapture, sandbox.OpCreateSeeded, sandbox.OpExportSnapshot, sandbox.OpImportSnapshot, sandbox.OpResume,
	sandbox.OpResumeCompute, sandbox.OpKillCompute, sandbox.OpDeleteSnapshot, sandbox.OpRunCommandCompute,
}

func TestInventoryIsDerivedFromTheInterfaces(t *testing.T) {
	inv := sandbox.Inventory()
	var all []providercontract.Operation
	for _, c := range inv {
		all = append(all, c.Methods...)
	}
	// Every method of every interface is in the inventory, except the
	// declaration accessor itself.
	for _, typ := range []reflect.Type{
		reflect.TypeFor[sandbox.SandboxProvider](), reflect.TypeFor[sandbox.CheckpointProvider](),
		reflect.TypeFor[sandbox.ObservationSource](), reflect.TypeFor[sandbox.BatchObservationSource](),
		reflect.TypeFor[sandbox.SelectionDiscoverer](), reflect.TypeFor[sandbox.CredentialVerifier](),
	} {
		for i := range typ.NumMethod() {
			name := providercontract.Operation(typ.Method(i).Name)
			if name == "ProviderOperations" {
				if slices.Contains(all, name) {
					t.Errorf("ProviderOperations is not an operation")
				}
				continue
			}
			if !slices.Contains(all, name) {
				t.Errorf("%s.%s missing from the inventory", typ.Name(), name)
			}
		}
	}
	// The named constants all name inventory methods, and cover it.
	named := append([]providercontract.Operation{
		sandbox.OpCreate, sandbox.OpGetInfo, sandbox.OpRenew, sandbox.OpKill, sandbox.OpRunCommand,
		sandbox.OpObserve, sandbox.OpObserveBatch, sandbox.OpDiscoverSelection, sandbox.OpVerifyCredential,
	}, checkpointOps...)
	slices.Sort(named)
	slices.Sort(all)
	if !slices.Equal(named, all) {
		t.Errorf("operation constants %v differ from the inventory %v", named, all)
	}
}

func valid() providercontract.Operations { return refadapter.Operations() }

func TestValidateOperationsAcceptsCompleteDeclarations(t *testing.T) {
	if err := sandbox.ValidateOperations(valid()); err != nil {
		t.Fatalf("reference declaration rejected: %v", err)
	}
	all := valid()
	for op := range all {
		all[op] = providercontract.Supported()
	}
	if err := sandbox.ValidateOperations(all); err != nil {
		t.Fatalf("all-supported declaration rejected: %v", err)
	}
}

// TestValidateOperationsRejects has at least one case per rule of the
// guide's "Explicit operation contracts".
func TestValidateOperationsRejects(t *testing.T) {
	u := providercontract.Unsupported
	cases := []struct {
		name   string
		mutate func(providercontract.Operations) providercontract.Operations
		code   providercontract.ContractCode
	}{
		{"nil declaration", func(providercontract.Operations) providercontract.Operations { return nil }, providercontract.CodeDeclarationMissing},
		{"empty declaration", func(providercontract.Operations) providercontract.Operations { return providercontract.Operations{} }, providercontract.CodeDeclarationMissing},
		{"missing required method", del(sandbox.OpKill), providercontract.CodeOperationUndeclared},
		{"missing checkpoint method", del(sandbox.OpDeleteSnapshot), providercontract.CodeOperationUndeclared},
		{"missing optional method", del(sandbox.OpVerifyCredential), providercontract.CodeOperationUndeclared},
		{"zero entry", set(sandbox.OpObserve, providercontract.Decision{}), providercontract.CodeDecisionMissing},
		{"unknown state", set(sandbox.OpObserve, providercontract.Decision{State: 7}), providercontract.CodeDecisionUnknown},
		{"supported with a reason", set(sandbox.OpObserve, providercontract.Decision{State: providercontract.StateSupported, Reason: "because"}), providercontract.CodeReasonWithSupport},
		{"unsupported without a reason", set(sandbox.OpObserveBatch, providercontract.Decision{State: providercontract.StateUnsupported}), providercontract.CodeReasonMissing},
		{"unsafe reason: native text", set(sandbox.OpObserveBatch, u("dial unix /var/run/docker.sock: connection refused")), providercontract.CodeReasonUnsafe},
		{"unsafe reason: upper case", set(sandbox.OpObserveBatch, u("NoBatch")), providercontract.CodeReasonUnsafe},
		{"unsafe reason: too long", set(sandbox.OpObserveBatch, u(providercontract.ReasonCode(strings.Repeat("a", 65)))), providercontract.CodeReasonUnsafe},
		{"unknown operation", set("CreateTwice", providercontract.Supported()), providercontract.CodeOperationUnknown},
		{"required Create unsupported", set(sandbox.OpCreate, u("no_create")), providercontract.CodeRequiredUnsupported},
		{"required GetInfo unsupported", set(sandbox.OpGetInfo, u("no_get")), providercontract.CodeRequiredUnsupported},
		{"required Renew unsupported", set(sandbox.OpRenew, u("no_lease")), providercontract.CodeRequiredUnsupported},
		{"required Kill unsupported", set(sandbox.OpKill, u("no_kill")), providercontract.CodeRequiredUnsupported},
		{"required RunCommand unsupported", set(sandbox.OpRunCommand, u("no_exec")), providercontract.CodeRequiredUnsupported},
		{"checkpoint decisions mixed", set(sandbox.OpSuspend, providercontract.Supported()), providercontract.CodeDecisionsMixed},
		{"checkpoint reasons mixed", set(sandbox.OpResume, u("another_reason")), providercontract.CodeDecisionsMixed},
		{"batch without single observation", func(o providercontract.Operations) providercontract.Operations {
			o[sandbox.OpObserve] = u("no_observe")
			o[sandbox.OpObserveBatch] = providercontract.Supported()
			return o
		}, providercontract.CodeRequirementUnmet},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := sandbox.ValidateOperations(c.mutate(valid()))
			if !errdefs.IsContract(err) {
				t.Fatalf("err = %v, want a contract error", err)
			}
			if got := providercontract.CodeOf(err); got != c.code {
				t.Fatalf("code = %q, want %q (%v)", got, c.code, err)
			}
			if strings.Contains(err.Error(), "CreateTwice") || strings.Contains(err.Error(), "docker.sock") {
				t.Fatalf("error echoes submitted text: %v", err)
			}
		})
	}
}

func del(op providercontract.Operation) func(providercontract.Operations) providercontract.Operations {
	return func(o providercontract.Operations) providercontract.Operations { delete(o, op); return o }
}

func set(op providercontract.Operation, d providercontract.Decision) func(providercontract.Operations) providercontract.Operations {
	return func(o providercontract.Operations) providercontract.Operations { o[op] = d; return o }
}

func TestCheckReturnsTypedErrorsWithoutIO(t *testing.T) {
	decl := valid()
	if err := decl.Check(sandbox.OpCreate); err != nil {
		t.Fatalf("supported op: %v", err)
	}
	err := decl.Check(sandbox.OpSuspend)
	ue, ok := providercontract.AsUnsupported(err, sandbox.OpSuspend)
	if !ok || ue.Code != "reference_no_checkpoint" || !errdefs.IsUnsupported(err) {
		t.Fatalf("unsupported op: %v", err)
	}
	if _, ok := providercontract.AsUnsupported(err, sandbox.OpResume); ok {
		t.Fatalf("an UnsupportedError for Suspend matched Resume")
	}
	delete(decl, sandbox.OpObserve)
	if err := decl.Check(sandbox.OpObserve); providercontract.CodeOf(err) != providercontract.CodeOperationUndeclared {
		t.Fatalf("undeclared op: %v", err)
	}
}

// partial implements only SandboxProvider.
type partial struct{ sandbox.SandboxProvider }

// wrongShape has every method but one with a different signature.
type wrongShape struct{ *refadapter.Provider }

func (wrongShape) ObserveBatch(context.Context, []sandbox.Reference) error { return nil }

func TestCheckImplements(t *testing.T) {
	if err := sandbox.CheckImplements(refadapter.New("", "i", nil)); err != nil {
		t.Fatalf("reference adapter: %v", err)
	}
	for name, p := range map[string]any{
		"nil": nil, "only SandboxProvider": partial{}, "wrong signature": wrongShape{},
	} {
		if err := sandbox.CheckImplements(p); providercontract.CodeOf(err) != providercontract.CodeMethodMissing {
			t.Errorf("%s: err = %v, want method_missing", name, err)
		}
	}
	var ce *providercontract.ContractError
	err := sandbox.CheckImplements(wrongShape{})
	if !errors.As(err, &ce) || ce.Operation != sandbox.OpObserveBatch {
		t.Errorf("wrong signature not named: %v", err)
	}
}
