package nodeagent

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// Capacity is what the host offers, reported with every health report.
type Capacity struct {
	CPUMillis     int64
	MemoryBytes   int64
	DiskFreeBytes int64
}

// HostCapacity reads the host's CPUs, memory (/proc/meminfo MemTotal) and
// the free space of the filesystem holding dir. A figure it cannot read is
// reported as zero, never guessed.
func HostCapacity(dir string) Capacity {
	c := Capacity{CPUMillis: int64(runtime.NumCPU()) * 1000}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) >= 2 && fields[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(fields[1], 10, 64); err == nil {
					c.MemoryBytes = kb * 1024
				}
				break
			}
		}
		f.Close()
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err == nil {
		c.DiskFreeBytes = int64(st.Bavail) * int64(st.Bsize)
	}
	return c
}
