package plan

import (
	"os"
	"path/filepath"
	"slices"
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

// cgroupMemoryLimit returns the lowest memory limit of this process's
// cgroup and those above it (v2 or v1), in bytes, or 0 if there is none
// or it cannot be read. A container's or a batch job's limit is what its
// OOM killer enforces, below the machine's RAM.
func cgroupMemoryLimit() int64 {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0
	}
	return cgroupLimitUnder("/sys/fs/cgroup", string(b))
}

// cgroupLimitUnder reads the limits of the cgroups that self (the text of
// /proc/self/cgroup) names, under the cgroup file system mounted at mount,
// and those of their ancestors: a limit set above a job binds it too.
// Where a cgroup namespace hides the path (a container), the walk still
// reaches the root the container sees, which holds its limit.
func cgroupLimitUnder(mount, self string) int64 {
	var lowest int64
	consider := func(file string) {
		b, err := os.ReadFile(file)
		if err != nil {
			return
		}
		// "max" (v2) or a value near 2^63 (v1) mean no limit.
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err == nil && n > 0 && n < 1<<60 && (lowest == 0 || n < lowest) {
			lowest = n
		}
	}
	for _, line := range strings.Split(self, "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		var dir, file string
		switch {
		case f[0] == "0" && f[1] == "":
			dir, file = mount, "memory.max"
		case slices.Contains(strings.Split(f[1], ","), "memory"):
			dir, file = filepath.Join(mount, "memory"), "memory.limit_in_bytes"
		default:
			continue
		}
		for p := filepath.Clean("/" + f[2]); ; p = filepath.Dir(p) {
			consider(filepath.Join(dir, p, file))
			if p == "/" {
				break
			}
		}
	}
	return lowest
}
