package plan

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// physicalMemory returns the machine's RAM in bytes, or 0 if unknown.
func physicalMemory() int64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}

// cgroupMemoryLimit returns the memory limit of this process's cgroup (v2,
// else v1) in bytes, or 0 if there is none or it cannot be read. A
// container's limit is what its OOM killer enforces, below the machine's RAM.
func cgroupMemoryLimit() int64 {
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// "max" (v2) or a value near 2^63 (v1) mean no limit.
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && n < 1<<60 {
			return n
		}
		return 0
	}
	return 0
}
