package scale

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

func numCPU() int { return runtime.NumCPU() }

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times (100 on
// Linux for every architecture Go supports here).
const clockTicks = 100

// procCPUSeconds reads the process's user plus system CPU time from
// /proc/<pid>/stat (fields 14 and 15, after the parenthesised name).
func procCPUSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	utime, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, err
	}
	stime, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, err
	}
	return float64(utime+stime) / clockTicks, nil
}
