package sandbox_test

import (
	"strings"
	"testing"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// TestProcessPathsValidate: both roots must be absolute and clean and
// neither the filesystem root; a refusal names the field and never
// quotes the path.
func TestProcessPathsValidate(t *testing.T) {
	ok := sandbox.ProcessPaths{Root: "/usr/lib/berth", State: "/var/lib/berth/providers"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid paths: %v", err)
	}
	cases := map[string]struct {
		p     sandbox.ProcessPaths
		field string
	}{
		"missing root":     {sandbox.ProcessPaths{State: ok.State}, "paths.root"},
		"missing state":    {sandbox.ProcessPaths{Root: ok.Root}, "paths.state"},
		"relative root":    {sandbox.ProcessPaths{Root: "lib/berth", State: ok.State}, "paths.root"},
		"dot-relative":     {sandbox.ProcessPaths{Root: ok.Root, State: "./zzstate"}, "paths.state"},
		"unclean root":     {sandbox.ProcessPaths{Root: "/usr/lib/../zzberth", State: ok.State}, "paths.root"},
		"trailing slash":   {sandbox.ProcessPaths{Root: ok.Root, State: "/var/zzberth/"}, "paths.state"},
		"double slash":     {sandbox.ProcessPaths{Root: "/usr//zzberth", State: ok.State}, "paths.root"},
		"filesystem root":  {sandbox.ProcessPaths{Root: "/", State: ok.State}, "paths.root"},
		"state filesystem": {sandbox.ProcessPaths{Root: ok.Root, State: "/"}, "paths.state"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := c.p.Validate()
			if f, _ := errdefs.Field(err); !errdefs.IsInvalid(err) || f != c.field {
				t.Fatalf("err = %v, want invalid %s", err, c.field)
			}
			if strings.Contains(err.Error(), "zz") {
				t.Fatalf("the refusal quotes the path: %v", err)
			}
		})
	}
}
