package plan

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCgroupLimitUnder: the limit is read at the process's own cgroup and
// every one above it, v2 and v1, the lowest wins, and "max" or v1's huge
// value mean none (only the mount's root was read, which
// misses a batch job's limit outside a cgroup namespace).
func TestCgroupLimitUnder(t *testing.T) {
	mount := t.TempDir()
	write := func(rel, v string) {
		p := filepath.Join(mount, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("memory.max", "max")
	write("jobs/memory.max", "8589934592")
	write("jobs/42/memory.max", "max")
	write("memory/memory.limit_in_bytes", "9223372036854771712")
	write("memory/batch/memory.limit_in_bytes", "4294967296")
	write("memory/batch/7/memory.limit_in_bytes", "2147483648")
	for _, tc := range []struct {
		self string
		want int64
	}{
		{"0::/jobs/42\n", 8 << 30},             // v2: the parent's limit binds
		{"0::/\n", 0},                          // v2 root: max
		{"0::/gone/away\n", 0},                 // a path the namespace hides: the root's
		{"5:memory:/batch/7\n0::/\n", 2 << 30}, // v1: its own, the lowest
		{"4:cpu,memory:/batch\n", 4 << 30},     // v1 with controllers joined
		{"3:cpu:/jobs/42\n", 0},                // no memory controller
		{"", 0},
	} {
		if got := cgroupLimitUnder(mount, tc.self); got != tc.want {
			t.Errorf("%q: got %d, want %d", tc.self, got, tc.want)
		}
	}
}
