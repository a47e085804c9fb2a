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

// processCPU is the CPU time, in seconds, of every process of this host
// whose name (/proc/<pid>/comm) is comm, by pid.
func processCPU(comm string) map[int]float64 {
	out := map[int]float64{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		name, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(name)) != comm {
			continue
		}
		if s, err := procCPUSeconds(pid); err == nil {
			out[pid] = s
		}
	}
	return out
}

// cpuSince is the CPU time the processes of after used since before: a
// process absent from before started in between and counts whole; one
// that ended in between is not counted (the sum is then a lower bound).
func cpuSince(before, after map[int]float64) float64 {
	var sum float64
	for pid, s := range after {
		sum += s - before[pid]
	}
	return sum
}
