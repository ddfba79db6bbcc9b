package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// The peak resident memory of a process, as its own figure. A child's
// ru_maxrss (what wait4 reports) is no use for that on Linux: exec folds the
// high-water mark of the address space it leaves into the new program's, and
// Go starts children with vfork semantics, so that address space is the
// parent's and a child's ru_maxrss is never below the parent's resident
// memory when it started it (golang/go#32054). VmHWM in /proc/PID/status is
// the high-water mark of the program's own address space, zero at exec.

// peakRSSEnv names a file that a command writes its peak resident memory
// to (in bytes, decimal) when it ends; "{cmd}" in it becomes the command's
// name. bench sets it on the children it measures.
const peakRSSEnv = "STREAMIDX_PEAK_RSS_FILE"

// vmHWM reads the peak resident memory, in bytes, from a /proc status
// file (/proc/self/status, /proc/PID/status).
func vmHWM(statusPath string) (int64, error) {
	data, err := os.ReadFile(statusPath)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: VmHWM %q: %w", statusPath, v, err)
			}
			return kib << 10, nil
		}
	}
	return 0, fmt.Errorf("%s: no VmHWM line", statusPath)
}

// writePeakRSS writes this process's peak resident memory to path.
func writePeakRSS(path string) error {
	n, err := vmHWM("/proc/self/status")
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(strconv.FormatInt(n, 10)), 0o644)
}

// readPeakRSS reads what writePeakRSS wrote to path.
func readPeakRSS(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("the peak RSS the child was to report: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("the peak RSS the child reported in %s: %w", path, err)
	}
	return n, nil
}

// userHZ is the unit of the CPU times in /proc/PID/stat: USER_HZ, 100 on
// every Linux architecture Go supports.
const userHZ = 100

// procCPU reads the CPU time a process has used so far (user and system)
// from a /proc stat file (/proc/self/stat, /proc/PID/stat).
func procCPU(statPath string) (time.Duration, error) {
	data, err := os.ReadFile(statPath)
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// the fields are counted from the last ')'.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, fmt.Errorf("%s: no command name", statPath)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 || len(f[0]) != 1 {
		return 0, fmt.Errorf("%s: not a /proc stat file (a state letter and at least 13 fields after the command name)", statPath)
	}
	var ticks int64
	for _, v := range f[11:13] { // utime and stime, fields 14 and 15
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: CPU time %q: %w", statPath, v, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}
