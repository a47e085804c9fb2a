package providercontract

import (
	"errors"

	"berth.dev/sandbox/errdefs"
)

// ErrContract is the class of every ContractError (errdefs.ErrContract).
var ErrContract = errdefs.ErrContract

// UnsupportedError is returned by an operation declared unsupported, before
// any native I/O. It names the exact operation and the declaration's safe
// reason code, never a native message, resource identity, endpoint or
// credential. It is of class errdefs.ErrUnsupported.
type UnsupportedError struct {
	Operation Operation
	Code      ReasonCode
}

func (e *UnsupportedError) Error() string {
	return "operation " + string(e.Operation) + " is unsupported: " + string(e.Code)
}

// Is makes UnsupportedError match errdefs.ErrUnsupported.
func (e *UnsupportedError) Is(target error) bool { return target == errdefs.ErrUnsupported }

// AsUnsupported reports whether err is an UnsupportedError for exactly op.
// An unsupported error for another operation, or ErrUnsupported without the
// typed error, does not count: only the exact typed error permits a
// fallback such as per-target observation.
func AsUnsupported(err error, op Operation) (*UnsupportedError, bool) {
	var ue *UnsupportedError
	if errors.As(err, &ue) && ue.Operation == op {
		return ue, true
	}
	return nil, false
}

// ContractCode is a fixed, safe code naming which contract rule failed.
type ContractCode string

// The contract rule codes.
const (
	CodeDeclarationMissing       ContractCode = "declaration_missing"
	CodeOperationUndeclared      ContractCode = "operation_undeclared"
	CodeOperationUnknown         ContractCode = "operation_unknown"
	CodeDecisionMissing          ContractCode = "decision_missing"
	CodeDecisionUnknown          ContractCode = "decision_unknown"
	CodeDecisionInvalid          ContractCode = "decision_invalid"
	CodeReasonMissing            ContractCode = "reason_missing"
	CodeReasonUnsafe             ContractCode = "reason_unsafe"
	CodeReasonWithSupport        ContractCode = "reason_with_support"
	CodeRequiredUnsupported      ContractCode = "required_operation_unsupported"
	CodeDecisionsMixed           ContractCode = "contract_decisions_mixed"
	CodeRequirementUnmet         ContractCode = "contract_requirement_unmet"
	CodeMethodMissing            ContractCode = "method_missing"
	CodeDeclarationMismatch      ContractCode = "declaration_mismatch"
	CodeInventoryInvalid         ContractCode = "inventory_invalid"
	CodeRegistrationKind         ContractCode = "registration_kind_invalid"
	CodeRegistrationDuplicate    ContractCode = "registration_duplicate"
	CodeRegistrationMode         ContractCode = "registration_mode_invalid"
	CodeRegistrationConstructor  ContractCode = "registration_constructor_invalid"
	CodeRegistrationValidator    ContractCode = "registration_validator_missing"
	CodeConfigurationAdapter     ContractCode = "configuration_adapter_missing"
	CodeConfigurationRequirement ContractCode = "configuration_requirement_invalid"
	CodeRuntimeInputPolicy       ContractCode = "runtime_input_policy_invalid"
	CodeSuspensionDefaults       ContractCode = "suspension_defaults_invalid"
	CodeArtifacts                ContractCode = "node_artifacts_invalid"
	CodeBuildContext             ContractCode = "build_context_invalid"
	CodeBuildResult              ContractCode = "build_result_invalid"
	CodeConfigurationKind        ContractCode = "configuration_kind_mismatch"
	CodeBatchResult              ContractCode = "batch_result_invalid"
)

// ContractError is a safe description of a broken contract: a fixed code,
// and the operation or registration field concerned when it is one of
// Berth's own names. It never includes submitted configuration or native
// diagnostics.
type ContractError struct {
	Code ContractCode
	// Operation is set only to an inventory operation name.
	Operation Operation
	// Field is set only to a field name authored in code.
	Field string
}

func (e *ContractError) Error() string {
	msg := "provider contract: " + string(e.Code)
	if e.Operation != "" {
		msg += " (operation " + string(e.Operation) + ")"
	}
	if e.Field != "" {
		msg += " (field " + e.Field + ")"
	}
	return msg
}

// Is makes ContractError match ErrContract.
func (e *ContractError) Is(target error) bool { return target == errdefs.ErrContract }

// CodeOf returns the contract code of err, or "" when err is no
// ContractError.
func CodeOf(err error) ContractCode {
	var ce *ContractError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}
