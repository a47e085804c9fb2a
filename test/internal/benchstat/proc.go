package benchstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcStatus reads a field of /proc/<pid>/status: a kB figure (VmRSS,
// VmHWM) or a count (Threads). The scale simulator, the hostile-load
// measurement and the fault suite's memory bound read berth-core's
// memory through it.
func ProcStatus(pid int, field string) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			return strconv.ParseInt(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}
