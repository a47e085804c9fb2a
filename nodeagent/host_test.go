package nodeagent

import "testing"

func TestHostCapacityReadsTheHost(t *testing.T) {
	c := HostCapacity(t.TempDir())
	if c.CPUMillis < 1000 || c.MemoryBytes < 64<<20 || c.DiskFreeBytes <= 0 {
		t.Fatalf("capacity = %+v", c)
	}
	if HostCapacity("/no/such/dir").DiskFreeBytes != 0 {
		t.Fatal("free space invented for a missing directory")
	}
}
