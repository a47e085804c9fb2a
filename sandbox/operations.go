package sandbox

import (
	"reflect"

	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// Operation names used by adapters when they decide or check an operation.
// They are names only: the inventory comes from the interfaces, and a test
// proves every constant names an inventory method.
const (
	OpCreate            providercontract.Operation = "Create"
	OpGetInfo           providercontract.Operation = "GetInfo"
	OpRenew             providercontract.Operation = "Renew"
	OpKill              providercontract.Operation = "Kill"
	OpRunCommand        providercontract.Operation = "RunCommand"
	OpInitial           providercontract.Operation = "Initial"
	OpNewCompute        providercontract.Operation = "NewCompute"
	OpGetCompute        providercontract.Operation = "GetCompute"
	OpSuspend           providercontract.Operation = "Suspend"
	OpCapture           providercontract.Operation = "Capture"
	OpCreateSeeded      providercontract.Operation = "CreateSeeded"
	OpExportSnapshot    providercontract.Operation = "ExportSnapshot"
	OpImportSnapshot    providercontract.Operation = "ImportSnapshot"
	OpResume            providercontract.Operation = "Resume"
	OpResumeCompute     providercontract.Operation = "ResumeCompute"
	OpKillCompute       providercontract.Operation = "KillCompute"
	OpDeleteSnapshot    providercontract.Operation = "DeleteSnapshot"
	OpRunCommandCompute providercontract.Operation = "RunCommandCompute"
	OpObserve           providercontract.Operation = "Observe"
	OpObserveBatch      providercontract.Operation = "ObserveBatch"
	OpDiscoverSelection providercontract.Operation = "DiscoverSelection"
	OpVerifyCredential  providercontract.Operation = "VerifyCredential"
)

// The contract names used in the inventory and in ContractErrors.
const (
	ContractSandboxProvider     = "sandbox.SandboxProvider"
	ContractCheckpointProvider  = "sandbox.CheckpointProvider"
	ContractSource              = "runtimeobs.Source"
	ContractBatchSource         = "runtimeobs.BatchSource"
	ContractSelectionDiscoverer = "sandbox.SelectionDiscoverer"
	ContractCredentialVerifier  = "sandbox.CredentialVerifier"
)

type contractInterface struct {
	name     string
	typ      reflect.Type
	rule     providercontract.Rule
	requires string
}

// contracts lists the contract interfaces, not their methods.
var contracts = []contractInterface{
	{ContractSandboxProvider, reflect.TypeFor[SandboxProvider](), providercontract.RuleRequired, ""},
	{ContractCheckpointProvider, reflect.TypeFor[CheckpointProvider](), providercontract.RuleUniform, ""},
	{ContractSource, reflect.TypeFor[ObservationSource](), providercontract.RuleExplicit, ""},
	{ContractBatchSource, reflect.TypeFor[BatchObservationSource](), providercontract.RuleExplicit, ContractSource},
	{ContractSelectionDiscoverer, reflect.TypeFor[SelectionDiscoverer](), providercontract.RuleExplicit, ""},
	{ContractCredentialVerifier, reflect.TypeFor[CredentialVerifier](), providercontract.RuleExplicit, ""},
}

// declarationMethod is the one method of SandboxProvider that is not an
// operation: it returns the declaration itself.
const declarationMethod = "ProviderOperations"

// Inventory derives the operation inventory from the contract interfaces by
// reflection: every method of every interface is an operation that each
// declaration must decide.
func Inventory() []providercontract.Contract {
	out := make([]providercontract.Contract, 0, len(contracts))
	for _, c := range contracts {
		var methods []providercontract.Operation
		for i := range c.typ.NumMethod() {
			if name := c.typ.Method(i).Name; name != declarationMethod {
				methods = append(methods, providercontract.Operation(name))
			}
		}
		out = append(out, providercontract.Contract{
			Name: c.name, Methods: methods, Rule: c.rule, Requires: c.requires,
		})
	}
	return out
}

// WithoutCheckpoints returns a copy of decl whose CheckpointProvider
// methods (from the inventory) are all unsupported with reason: the
// declaration of a backend like decl that has no checkpoints.
func WithoutCheckpoints(decl providercontract.Operations, reason providercontract.ReasonCode) providercontract.Operations {
	out := decl.Clone()
	for _, c := range Inventory() {
		if c.Name != ContractCheckpointProvider {
			continue
		}
		for _, op := range c.Methods {
			out[op] = providercontract.Unsupported(reason)
		}
	}
	return out
}

// ValidateOperations checks a declaration against the inventory: every
// method decided, the required operations supported, checkpoint methods
// decided alike, batch observation only with single observation, and no
// missing, zero, unknown or unsafe entries.
func ValidateOperations(decl providercontract.Operations) error {
	return providercontract.Validate(decl, Inventory())
}

// CheckImplements checks, by method shape, that p implements every
// contract interface, as every adapter must (an unsupported method is still
// implemented and returns UnsupportedError). It names the first missing
// method.
func CheckImplements(p any) error {
	if p == nil {
		return &providercontract.ContractError{Code: providercontract.CodeMethodMissing}
	}
	t := reflect.TypeOf(p)
	for _, c := range contracts {
		if t.Implements(c.typ) {
			continue
		}
		for i := range c.typ.NumMethod() {
			m := c.typ.Method(i)
			pm, ok := t.MethodByName(m.Name)
			if !ok || !methodMatches(pm.Type, m.Type) {
				return &providercontract.ContractError{
					Code: providercontract.CodeMethodMissing, Operation: providercontract.Operation(m.Name),
				}
			}
		}
	}
	return nil
}

// methodMatches compares a concrete method (with receiver) to an interface
// method (without receiver).
func methodMatches(concrete, iface reflect.Type) bool {
	if concrete.NumIn() != iface.NumIn()+1 || concrete.NumOut() != iface.NumOut() ||
		concrete.IsVariadic() != iface.IsVariadic() {
		return false
	}
	for i := range iface.NumIn() {
		if concrete.In(i+1) != iface.In(i) {
			return false
		}
	}
	for i := range iface.NumOut() {
		if concrete.Out(i) != iface.Out(i) {
			return false
		}
	}
	return true
}

// IsUnsupportedOp reports whether err is the typed UnsupportedError for op.
func IsUnsupportedOp(err error, op providercontract.Operation) bool {
	_, ok := providercontract.AsUnsupported(err, op)
	return ok && errdefs.IsUnsupported(err)
}
