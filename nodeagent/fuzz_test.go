package nodeagent

import (
	"testing"

	"berth.dev/sandbox/errdefs"
)

// FuzzDecodeConfig: the agent's configuration decoder never panics and
// rejects only with ErrInvalid.
func FuzzDecodeConfig(f *testing.F) {
	f.Add([]byte(`{"state_dir":"/var/lib/berth","listen":"127.0.0.1:7443","provider":"docker","node":{}}`))
	f.Add([]byte(`{"state_dir":"/var/lib/berth","listen":"127.0.0.1:7443","provider":"docker","node":{},` +
		`"capacity":{"reserve":{"cpu_millis":500,"memory_bytes":0},"cpu_overcommit":2.5}}`))
	f.Add([]byte(`{"state_dir":"/var/lib/berth","listen":"127.0.0.1:7443","provider":"docker","node":{},"generation":{"number":1}}`))
	f.Add([]byte(`{"state_dir":"relative"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := DecodeConfig(data)
		if err != nil {
			if !errdefs.IsInvalid(err) {
				t.Fatalf("rejection of another class: %v", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted an invalid configuration: %v", err)
		}
	})
}
