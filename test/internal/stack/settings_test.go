package stack

import (
	"slices"
	"testing"
)

func TestCoreTuningLeavesOutOnlyAnInstallationsOwnFlags(t *testing.T) {
	site := []string{"--migrate", "--public-url", "https://x:1", "--state-dir", "/s", "--admin-listen", "127.0.0.1:0",
		"--listen", "127.0.0.1:0", "--runtime-listen", "10.0.0.1:2"}
	if got := CoreTuning(site); len(got) != 0 {
		t.Errorf("CoreTuning(site flags) = %q, want none", got)
	}
	args := append(slices.Clone(site), "--lease-ttl", "3s", "--runtime-insecure", "--node-interval=200ms", "--runtime-keepalive", "2s")
	want := []string{"--lease-ttl 3s", "--runtime-insecure", "--node-interval 200ms", "--runtime-keepalive 2s"}
	if got := CoreTuning(args); !slices.Equal(got, want) {
		t.Errorf("CoreTuning = %q, want %q", got, want)
	}
}
