package contracttest

import "fmt"

// Violations runs check with a Reporter that collects what it reports
// instead of failing, and returns the messages (a Fatalf ends check
// there). The suite's own tests and adapters' tests use it to prove that
// the suite rejects a deliberately broken adapter.
func Violations(check func(Reporter)) (msgs []string) {
	r := &collector{}
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(stopCheck); !ok {
				panic(v)
			}
		}
		msgs = r.msgs
	}()
	check(r)
	return r.msgs
}

// collector is Violations' Reporter.
type collector struct{ msgs []string }

// stopCheck is the panic value of a collector's Fatalf.
type stopCheck struct{}

func (r *collector) Helper() {}

func (r *collector) Errorf(format string, args ...any) {
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func (r *collector) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	panic(stopCheck{})
}
