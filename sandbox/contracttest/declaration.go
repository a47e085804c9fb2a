package contracttest

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"berth.dev/sandbox"
	"berth.dev/sandbox/providercontract"
)

// RunDeclaration checks p's declaration against the inventory, its method
// shapes against every contract interface, and that the declaration it
// returns is a copy the caller cannot use to change the adapter.
func RunDeclaration(t *testing.T, p sandbox.SandboxProvider) {
	t.Helper()
	decl := p.ProviderOperations()
	if err := sandbox.ValidateOperations(decl); err != nil {
		t.Fatalf("declaration rejected: %v", err)
	}
	if err := sandbox.CheckImplements(p); err != nil {
		t.Fatalf("adapter does not implement every contract interface: %v", err)
	}
	for op := range decl {
		decl[op] = providercontract.Decision{}
	}
	if err := sandbox.ValidateOperations(p.ProviderOperations()); err != nil {
		t.Fatalf("changing a returned declaration changed the adapter's: %v", err)
	}
}

// RunUnsupported calls every method that newProvider's adapter declares
// unsupported, with zero arguments, and requires the typed UnsupportedError
// for exactly that operation and a zero result. newProvider must return an
// adapter with no native client configured, so any native I/O would fail
// the test (or panic, which is reported as a failure).
func RunUnsupported(t *testing.T, newProvider func(t *testing.T) sandbox.SandboxProvider) {
	t.Helper()
	p := newProvider(t)
	decl := p.ProviderOperations()
	for _, op := range decl.Sorted() {
		d := decl[op]
		if d.State != providercontract.StateUnsupported {
			continue
		}
		t.Run(string(op), func(t *testing.T) {
			outs, err := callByName(newProvider(t), string(op))
			if err != nil {
				t.Fatal(err)
			}
			last := outs[len(outs)-1]
			callErr, _ := last.Interface().(error)
			ue, ok := providercontract.AsUnsupported(callErr, op)
			if !ok {
				t.Fatalf("%s returned %v, want UnsupportedError for %s", op, callErr, op)
			}
			if ue.Code != d.Reason {
				t.Errorf("%s reason = %q, want the declared %q", op, ue.Code, d.Reason)
			}
			for i, out := range outs[:len(outs)-1] {
				if !out.IsZero() {
					t.Errorf("%s result %d is not zero: %#v", op, i, out.Interface())
				}
			}
		})
	}
}

// callByName calls p's method name with a background context for context
// parameters and zero values for the others, recovering a panic as an error.
func callByName(p any, name string) (outs []reflect.Value, err error) {
	m := reflect.ValueOf(p).MethodByName(name)
	if !m.IsValid() {
		return nil, fmt.Errorf("adapter has no method %s", name)
	}
	mt := m.Type()
	if mt.NumOut() == 0 || mt.Out(mt.NumOut()-1) != reflect.TypeFor[error]() {
		return nil, fmt.Errorf("method %s does not return an error last", name)
	}
	args := make([]reflect.Value, mt.NumIn())
	ctxType := reflect.TypeFor[context.Context]()
	for i := range args {
		if mt.In(i) == ctxType {
			args[i] = reflect.ValueOf(context.Background())
		} else {
			args[i] = reflect.Zero(mt.In(i))
		}
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("method %s panicked (native I/O without a client?): %v", name, r)
		}
	}()
	return m.Call(args), nil
}
