package cache

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
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
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dir, fingerprint, lockName), &st); err != nil {
		if os.IsNotExist(err) {
			return Idle, nil, nil
		}
		return Idle, nil, fmt.Errorf("cache: users of %s: %w", fingerprint, err)
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return Idle, nil, fmt.Errorf("cache: users of %s: %w", fingerprint, err)
	}
	defer f.Close()
	return parseLocks(bufio.NewScanner(f), uint64(st.Ino))
}

// parseLocks scans /proc/locks lines for flocks on inode ino, e.g.
// "1: FLOCK  ADVISORY  WRITE 1234 00:2e:5678 0 EOF".
func parseLocks(sc *bufio.Scanner, ino uint64) (Use, []int, error) {
	use := Idle
	var pids []int
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] != "FLOCK" { // "N: -> FLOCK ..." is a waiter
			continue
		}
		dev := strings.Split(f[5], ":")
		if n, err := strconv.ParseUint(dev[len(dev)-1], 10, 64); err != nil || n != ino {
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
