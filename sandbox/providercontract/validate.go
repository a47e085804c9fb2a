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
	owner, byName, err := indexInventory(inventory)
	if err != nil {
		return err
	}
	for op := range decl {
		if owner[op] == nil {
			// The unknown name is submitted text: do not echo it.
			return &ContractError{Code: CodeOperationUnknown}
		}
	}
	for i := range inventory {
		if err := validContract(decl, &inventory[i], byName); err != nil {
			return err
		}
	}
	return requirementsMet(decl, inventory, byName)
}

// indexInventory maps every operation to its contract and every contract to
// its name, so Validate can tell an unknown operation from a known one. It
// rejects an inventory with an unnamed or empty contract, a name used twice
// or an operation claimed by two contracts: those are bugs of the caller's
// reflection, not of the declaration.
func indexInventory(inventory []Contract) (map[Operation]*Contract, map[string]*Contract, error) {
	owner := make(map[Operation]*Contract)
	byName := make(map[string]*Contract)
	for i := range inventory {
		c := &inventory[i]
		if c.Name == "" || len(c.Methods) == 0 || byName[c.Name] != nil {
			return nil, nil, &ContractError{Code: CodeInventoryInvalid}
		}
		byName[c.Name] = c
		for _, m := range c.Methods {
			if owner[m] != nil {
				return nil, nil, &ContractError{Code: CodeInventoryInvalid, Operation: m}
			}
			owner[m] = c
		}
	}
	return owner, byName, nil
}

// validContract checks one contract's decisions against its Rule, in method
// order, so the first error names the first offending method. It also
// rejects a Requires that names no contract of the inventory, before any
// decision of c is looked at.
func validContract(decl Operations, c *Contract, byName map[string]*Contract) error {
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
	return nil
}

// requirementsMet rejects a contract that supports any method while the
// contract it Requires is not fully supported. It runs after every
// contract's decisions are valid, so a requirement is judged on valid
// decisions only.
func requirementsMet(decl Operations, inventory []Contract, byName map[string]*Contract) error {
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
