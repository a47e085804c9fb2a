package providercontract

// Rule says how the methods of one contract interface must be decided.
type Rule uint8

const (
	// RuleRequired: every method must be supported (SandboxProvider).
	RuleRequired Rule = iota + 1
	// RuleUniform: every method needs a decision and all decisions must be
	// the same (CheckpointProvider).
	RuleUniform
	// RuleExplicit: every method needs its own explicit decision.
	RuleExplicit
)

// Contract describes one contract interface for validation. Methods is
// derived from the interface by reflection (sandbox.Inventory), never typed
// by hand.
type Contract struct {
	// Name is the interface's qualified name, for example
	// "sandbox.CheckpointProvider".
	Name    string
	Methods []Operation
	Rule    Rule
	// Requires names another contract that must be supported whenever any
	// method of this one is (runtimeobs.BatchSource requires Source).
	Requires string
}

// Validate checks a declaration against an inventory of contracts. It
// rejects a missing declaration, missing, zero, unknown or unsafe entries,
// entries for operations outside the inventory, an unsupported required
// operation, mixed decisions in a uniform contract and an unmet contract
// requirement. Errors are ContractErrors.
func Validate(decl Operations, inventory []Contract) error {
	if len(decl) == 0 {
		return &ContractError{Code: CodeDeclarationMissing}
	}
	owner := make(map[Operation]*Contract)
	byName := make(map[string]*Contract)
	for i := range inventory {
		c := &inventory[i]
		if c.Name == "" || len(c.Methods) == 0 || byName[c.Name] != nil {
			return &ContractError{Code: CodeInventoryInvalid}
		}
		byName[c.Name] = c
		for _, m := range c.Methods {
			if owner[m] != nil {
				return &ContractError{Code: CodeInventoryInvalid, Operation: m}
			}
			owner[m] = c
		}
	}
	for op := range decl {
		if owner[op] == nil {
			// The unknown name is submitted text: do not echo it.
			return &ContractError{Code: CodeOperationUnknown}
		}
	}
	for i := range inventory {
		c := &inventory[i]
		if c.Requires != "" && byName[c.Requires] == nil {
			return &ContractError{Code: CodeInventoryInvalid}
		}
		var first Decision
		for j, m := range c.Methods {
			d, ok := decl[m]
			if !ok {
				return &ContractError{Code: CodeOperationUndeclared, Operation: m}
			}
			if err := validDecision(m, d); err != nil {
				return err
			}
			if c.Rule == RuleRequired && d.State != StateSupported {
				return &ContractError{Code: CodeRequiredUnsupported, Operation: m}
			}
			if j == 0 {
				first = d
			} else if c.Rule == RuleUniform && d != first {
				return &ContractError{Code: CodeDecisionsMixed, Operation: m}
			}
		}
	}
	for i := range inventory {
		c := &inventory[i]
		if c.Requires == "" || !anySupported(decl, c) {
			continue
		}
		if !allSupported(decl, byName[c.Requires]) {
			return &ContractError{Code: CodeRequirementUnmet, Operation: c.Methods[0]}
		}
	}
	return nil
}

func validDecision(op Operation, d Decision) error {
	switch d.State {
	case StateUnset:
		return &ContractError{Code: CodeDecisionMissing, Operation: op}
	case StateSupported:
		if d.Reason != "" {
			return &ContractError{Code: CodeReasonWithSupport, Operation: op}
		}
	case StateUnsupported:
		if d.Reason == "" {
			return &ContractError{Code: CodeReasonMissing, Operation: op}
		}
		if !d.Reason.Valid() {
			return &ContractError{Code: CodeReasonUnsafe, Operation: op}
		}
	default:
		return &ContractError{Code: CodeDecisionUnknown, Operation: op}
	}
	return nil
}

func anySupported(decl Operations, c *Contract) bool {
	for _, m := range c.Methods {
		if decl.Supports(m) {
			return true
		}
	}
	return false
}

func allSupported(decl Operations, c *Contract) bool {
	for _, m := range c.Methods {
		if !decl.Supports(m) {
			return false
		}
	}
	return true
}
