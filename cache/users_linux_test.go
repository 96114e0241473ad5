package cache

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestParseLocks: a lock counts only when both its device and its inode
// are the cache lock file's; inode numbers repeat across filesystems.
func TestParseLocks(t *testing.T) {
	const table = `1: FLOCK  ADVISORY  WRITE 1234 00:2e:5678 0 EOF
1: -> FLOCK  ADVISORY  WRITE 999 00:2e:5678 0 EOF
2: FLOCK  ADVISORY  READ  2001 00:2e:91 0 EOF
3: FLOCK  ADVISORY  READ  2002 00:2e:91 0 EOF
4: POSIX  ADVISORY  WRITE 77 00:2e:91 0 EOF
5: OFDLCK ADVISORY  READ  -1 00:2e:91 0 EOF
6: FLOCK  ADVISORY  WRITE 4242 08:01:5678 0 EOF
7: FLOCK  ADVISORY  READ  3001 103:02:91 0 EOF
8: FLOCK  ADVISORY  WRITE 3002 00:2e:0x5b 0 EOF
9: FLOCK  ADVISORY  WRITE 3003 <none>:0 0 EOF
10: FLOCK  ADVISORY  WRITE 3004 00:2e:91:7 0 EOF
`
	tmpfs := device{0, 0x2e}
	sda1 := device{8, 1}
	nvme := device{0x103, 2} // 259:2, printed in hex
	for _, tc := range []struct {
		name string
		devs []device
		ino  uint64
		use  Use
		pids []int
	}{
		{"writer", []device{tmpfs}, 5678, Writing, []int{1234}},
		{"same inode on another device", []device{sda1}, 5678, Writing, []int{4242}},
		{"readers", []device{tmpfs}, 91, Reading, []int{2001, 2002}},
		{"three-digit hex major", []device{nvme}, 91, Reading, []int{3001}},
		{"either of two devices", []device{sda1, tmpfs}, 5678, Writing, []int{1234, 4242}},
		{"inode on no device given", []device{{8, 2}}, 5678, Idle, nil},
		{"minor read as hex, not decimal", []device{{0, 2}}, 5678, Idle, nil},
		{"no lock on the inode", []device{tmpfs}, 42, Idle, nil},
		{"no device", nil, 5678, Idle, nil},
	} {
		use, pids, err := parseLocks(bufio.NewScanner(strings.NewReader(table)), tc.devs, tc.ino)
		if err != nil || use != tc.use || !slices.Equal(pids, tc.pids) {
			t.Errorf("%s: devices %v inode %d: %q %v %v, want %q %v", tc.name, tc.devs, tc.ino, use, pids, err, tc.use, tc.pids)
		}
	}
}

// TestSplitDev checks the split of a dev_t against the encoding glibc's
// makedev uses, including numbers too large for the old 8:8 layout.
func TestSplitDev(t *testing.T) {
	makedev := func(major, minor uint64) uint64 {
		return (major&0xfff)<<8 | (major&^0xfff)<<32 | minor&0xff | (minor&^0xff)<<12
	}
	for _, d := range []device{{0, 0}, {8, 1}, {0, 0x2e}, {259, 2}, {0xfff, 0xff}, {0x1000, 0x100}, {0xfffff, 0xfffff}, {0xffffffff, 0xffffffff}} {
		if got := splitDev(makedev(d.major, d.minor)); got != d {
			t.Errorf("splitDev(makedev(%#x, %#x)) = %#x:%#x", d.major, d.minor, got.major, got.minor)
		}
	}
	if got := splitDev(0x0801); got != (device{8, 1}) {
		t.Errorf("splitDev(0x0801) = %v, want 8:1", got)
	}
}

// TestUsersFindsARealLock takes a flock on a real lock file, as another
// process filling the cache would, and finds it in the kernel's table with
// the device Users works out for the file; then a lock on a file of another
// cache, and none.
func TestUsersFindsARealLock(t *testing.T) {
	dir := t.TempDir()
	lockAt := func(fp string, how int) *os.File {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, fp), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(filepath.Join(dir, fp, lockName), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(f.Fd()), how); err != nil {
			t.Fatal(err)
		}
		return f
	}
	a := lockAt("a", syscall.LOCK_EX)
	use, pids, err := Users(dir, "a")
	if err != nil || use != Writing || !slices.Equal(pids, []int{os.Getpid()}) {
		t.Errorf("exclusive flock: %q %v %v, want writing by pid %d", use, pids, err, os.Getpid())
	}
	// The device Users matched must be the one the kernel printed: look
	// for our lock's line with the inode alone, then compare its device.
	var st syscall.Stat_t
	if err := syscall.Fstat(int(a.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	table, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Fatal(err)
	}
	sb, sbErr := superblockDev(a)
	found := false
	for line := range strings.Lines(string(table)) {
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "FLOCK" || f[4] != strconv.Itoa(os.Getpid()) {
			continue
		}
		d, ino, ok := parseLockFile(f[5])
		if !ok || ino != uint64(st.Ino) {
			continue
		}
		found = true
		if d != splitDev(uint64(st.Dev)) && (sbErr != nil || d != sb) {
			t.Errorf("/proc/locks names device %x:%x; st_dev is %v, the mount's %v (%v)", d.major, d.minor, splitDev(uint64(st.Dev)), sb, sbErr)
		}
	}
	if !found {
		t.Errorf("no flock of pid %d on inode %d in /proc/locks:\n%s", os.Getpid(), st.Ino, table)
	}
	if sbErr != nil {
		t.Errorf("superblockDev: %v", sbErr)
	}

	// Another cache in the same directory is not in use because of a.
	lockAt("b", syscall.LOCK_SH).Close() // creates b's lock file, unlocked
	if use, pids, err := Users(dir, "b"); err != nil || use != Idle || pids != nil {
		t.Errorf("b while a is locked: %q %v %v, want idle", use, pids, err)
	}
	b := lockAt("b", syscall.LOCK_SH)
	defer b.Close()
	if use, pids, err := Users(dir, "b"); err != nil || use != Reading || !slices.Equal(pids, []int{os.Getpid()}) {
		t.Errorf("shared flock on b: %q %v %v, want reading by pid %d", use, pids, err, os.Getpid())
	}
	a.Close()
	if use, pids, err := Users(dir, "a"); err != nil || use != Idle || pids != nil {
		t.Errorf("a after unlock: %q %v %v, want idle", use, pids, err)
	}
}

// TestUsers reads the kernel's lock table for a cache being filled, then
// for the same cache complete and shared.
func TestUsers(t *testing.T) {
	dir := t.TempDir()
	if use, _, err := Users(dir, "fp"); err != nil || use != Idle {
		t.Fatalf("Users of no cache = %q, %v", use, err)
	}
	c := openT(t, dir, "fp", Options{})
	if err := c.Put(0, testSample(0)); err != nil {
		t.Fatal(err)
	}
	use, pids, err := Users(dir, "fp")
	if err != nil || use != Writing || !slices.Equal(pids, []int{os.Getpid()}) {
		t.Errorf("while filling: %q %v %v, want writing by us", use, pids, err)
	}
	if err := c.MarkComplete(); err != nil {
		t.Fatal(err)
	}
	if use, _, err := Users(dir, "fp"); err != nil || use != Reading {
		t.Errorf("once complete: %q %v, want reading", use, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if use, _, err := Users(dir, "fp"); err != nil || use != Idle {
		t.Errorf("after Close: %q %v, want idle", use, err)
	}
}

// FuzzParseLocks: any table parses without panicking, and a use other than
// Idle always comes with the processes that hold the lock.
func FuzzParseLocks(f *testing.F) {
	f.Add("1: FLOCK  ADVISORY  WRITE 1234 00:2e:5678 0 EOF\n", uint64(0), uint64(0x2e), uint64(5678))
	f.Add("2: FLOCK  ADVISORY  READ  2001 00:2e:91 0 EOF\n3: -> FLOCK ADVISORY WRITE 1 0:0:91 0 EOF\n", uint64(0), uint64(0x2e), uint64(91))
	f.Add("x: FLOCK a b c :::\n", uint64(0), uint64(0), uint64(0))
	f.Fuzz(func(t *testing.T, table string, major, minor, ino uint64) {
		use, pids, err := parseLocks(bufio.NewScanner(strings.NewReader(table)), []device{{major, minor}}, ino)
		if err == nil && use != Idle && len(pids) == 0 {
			t.Errorf("use %q with no processes", use)
		}
	})
}
