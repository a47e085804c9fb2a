package docker_test

import (
	"testing"

	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/errdefs"
)

// FuzzDecodeNodeConfig: the node configuration decoder never panics,
// rejects with ErrInvalid only, and what it accepts validates.
func FuzzDecodeNodeConfig(f *testing.F) {
	f.Add([]byte(validNode))
	f.Add([]byte(`{"network":"host"}`))
	f.Add([]byte(`{"socket":"/a","socket":"/b"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := docker.DecodeNodeConfig(data)
		if err != nil {
			if !errdefs.IsInvalid(err) {
				t.Fatalf("rejection of another class: %v", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted an invalid configuration: %v", err)
		}
		if cfg.Network == "host" {
			t.Fatal("accepted the host network")
		}
	})
}
