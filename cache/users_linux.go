package cache

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Use tells how processes hold a cache now: Writing (one process fills or
// repairs it), Reading (processes share a complete cache) or Idle.
type Use string

// The uses of a cache.
const (
	Idle    Use = ""
	Reading Use = "reading"
	Writing Use = "writing"
)

// Users reports how the cache DIR/<fingerprint> is held, and by which
// processes. It reads the kernel's table of locks (/proc/locks) rather
// than probing the lock, which could make a process opening the cache at
// that moment fail.
func Users(dir, fingerprint string) (Use, []int, error) {
	path := filepath.Join(dir, fingerprint, lockName)
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		if os.IsNotExist(err) {
			return Idle, nil, nil
		}
		return Idle, nil, fmt.Errorf("cache: users of %s: %w", fingerprint, err)
	}
	devs := []device{splitDev(uint64(st.Dev))}
	// /proc/locks names the filesystem by its superblock's device, which
	// is not always st_dev: btrfs reports a device of the subvolume in
	// st_dev, and overlayfs may report a layer's. The mount the file lives
	// on gives the superblock's. Without it (a lock file we may not read,
	// a kernel before 3.15) st_dev is right on most filesystems.
	if f, err := os.Open(path); err == nil {
		if d, err := superblockDev(f); err == nil && d != devs[0] {
			devs = append(devs, d)
		}
		f.Close()
	}
	locks, err := os.Open("/proc/locks")
	if err != nil {
		return Idle, nil, fmt.Errorf("cache: users of %s: %w", fingerprint, err)
	}
	defer locks.Close()
	return parseLocks(bufio.NewScanner(locks), devs, uint64(st.Ino))
}

// device is a device number split as the kernel prints it.
type device struct{ major, minor uint64 }

// splitDev splits a dev_t as glibc's major() and minor() do: Linux keeps
// the low 8 bits of the minor and 12 bits of the major in the low 20 bits,
// for compatibility with the old 16-bit dev_t, and the rest above them.
func splitDev(dev uint64) device {
	return device{
		major: (dev&0x00000000000fff00)>>8 | (dev&0xfffff00000000000)>>32,
		minor: dev&0x00000000000000ff | (dev&0x00000ffffff00000)>>12,
	}
}

// superblockDev returns the device of the filesystem f's mount, as
// /proc/self/mountinfo gives it: the device /proc/locks prints. The mount
// is found by the ID the kernel gives for f's descriptor, so bind mounts
// and paths with symbolic links need no resolving.
func superblockDev(f *os.File) (device, error) {
	info, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", f.Fd()))
	if err != nil {
		return device{}, err
	}
	var mnt string
	for line := range strings.Lines(string(info)) {
		if v, ok := strings.CutPrefix(line, "mnt_id:"); ok {
			mnt = strings.TrimSpace(v)
			break
		}
	}
	if mnt == "" {
		return device{}, fmt.Errorf("no mnt_id in fdinfo of %s", f.Name())
	}
	mounts, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return device{}, err
	}
	defer mounts.Close()
	sc := bufio.NewScanner(mounts)
	// Mount options and paths can make a line longer than Scanner's 64 KiB
	// default.
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		// "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw"
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || fields[0] != mnt {
			continue
		}
		maj, min, ok := strings.Cut(fields[2], ":")
		if !ok {
			break
		}
		ma, err1 := strconv.ParseUint(maj, 10, 32)
		mi, err2 := strconv.ParseUint(min, 10, 32)
		if err1 != nil || err2 != nil {
			break
		}
		return device{ma, mi}, nil
	}
	if err := sc.Err(); err != nil {
		return device{}, err
	}
	return device{}, fmt.Errorf("mount %s of %s not found in mountinfo", mnt, f.Name())
}

// parseLocks scans /proc/locks lines for flocks on inode ino of one of the
// devices devs, e.g. "1: FLOCK  ADVISORY  WRITE 1234 00:2e:5678 0 EOF",
// where the kernel prints "%02x:%02x:%lu" of the major, the minor and the
// inode. The device counts: inode numbers are only unique within one
// filesystem.
func parseLocks(sc *bufio.Scanner, devs []device, ino uint64) (Use, []int, error) {
	use := Idle
	var pids []int
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] != "FLOCK" { // "N: -> FLOCK ..." is a waiter
			continue
		}
		if d, n, ok := parseLockFile(f[5]); !ok || n != ino || !slices.Contains(devs, d) {
			continue
		}
		pid, _ := strconv.Atoi(f[4])
		pids = append(pids, pid)
		switch f[3] {
		case "WRITE":
			use = Writing
		case "READ":
			if use == Idle {
				use = Reading
			}
		}
	}
	return use, pids, sc.Err()
}

// parseLockFile parses /proc/locks' "MAJ:MIN:INODE", major and minor in
// hexadecimal and the inode in decimal. A lock on no inode reads
// "<none>:0", which does not parse.
func parseLockFile(s string) (device, uint64, bool) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return device{}, 0, false
	}
	maj, err1 := strconv.ParseUint(parts[0], 16, 32)
	min, err2 := strconv.ParseUint(parts[1], 16, 32)
	ino, err3 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return device{}, 0, false
	}
	return device{maj, min}, ino, true
}
