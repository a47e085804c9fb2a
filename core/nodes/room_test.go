package nodes_test

import (
	"testing"

	"berth.dev/sandbox"

	"berth.dev/core/nodes"
	"berth.dev/core/store"
)

// TestNoRoom: the reason is the first bound placement's rule reaches, in
// its order (max_active, then CPU, memory and disk as the reported figure
// divided by the per-sandbox need); a zero need bounds nothing; one more
// that fits is no reason.
func TestNoRoom(t *testing.T) {
	limits := sandbox.Specification{Resources: sandbox.Resources{CPUMillis: 500, MemoryBytes: 1 << 30, DiskBytes: 1 << 30}, MaxActive: 4}
	const cpu, mem, disk = 2000, 8 << 30, 8 << 30 // room for 4, 8 and 8
	cases := []struct {
		name           string
		active         int64
		cpu, mem, disk int64
		limits         sandbox.Specification
		want           string
	}{
		{"room", 2, cpu, mem, disk, limits, ""},
		{"max_active first", 4, cpu, 0, 0, limits, nodes.NoRoomMaxActive},
		{"cpu", 2, 1000, mem, disk, limits, nodes.NoRoomCPU},
		{"memory", 1, cpu, 1 << 30, disk, limits, nodes.NoRoomMemory},
		{"disk", 1, cpu, mem, 1 << 29, limits, nodes.NoRoomDisk},
		{"no report fits nothing", 0, 0, 0, 0, limits, nodes.NoRoomCPU},
		{"a zero need bounds nothing", 3, 0, 0, 0, sandbox.Specification{MaxActive: 4}, ""},
	}
	for _, tc := range cases {
		if got := nodes.NoRoom(tc.limits, store.NodeLoad{Active: tc.active}, tc.cpu, tc.mem, tc.disk); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
