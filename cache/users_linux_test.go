package cache

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestParseLocks(t *testing.T) {
	const table = `1: FLOCK  ADVISORY  WRITE 1234 00:2e:5678 0 EOF
1: -> FLOCK  ADVISORY  WRITE 999 00:2e:5678 0 EOF
2: FLOCK  ADVISORY  READ  2001 00:2e:91 0 EOF
3: FLOCK  ADVISORY  READ  2002 00:2e:91 0 EOF
4: POSIX  ADVISORY  WRITE 77 00:2e:91 0 EOF
5: OFDLCK ADVISORY  READ  -1 00:2e:91 0 EOF
`
	for _, tc := range []struct {
		ino  uint64
		use  Use
		pids []int
	}{
		{5678, Writing, []int{1234}},
		{91, Reading, []int{2001, 2002}},
		{42, Idle, nil},
	} {
		use, pids, err := parseLocks(bufio.NewScanner(strings.NewReader(table)), tc.ino)
		if err != nil || use != tc.use || !slices.Equal(pids, tc.pids) {
			t.Errorf("inode %d: %q %v %v, want %q %v", tc.ino, use, pids, err, tc.use, tc.pids)
		}
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
	f.Add("1: FLOCK  ADVISORY  WRITE 1234 00:2e:5678 0 EOF\n", uint64(5678))
	f.Add("2: FLOCK  ADVISORY  READ  2001 00:2e:91 0 EOF\n3: -> FLOCK ADVISORY WRITE 1 0:0:91 0 EOF\n", uint64(91))
	f.Add("x: FLOCK a b c :::\n", uint64(0))
	f.Fuzz(func(t *testing.T, table string, ino uint64) {
		use, pids, err := parseLocks(bufio.NewScanner(strings.NewReader(table)), ino)
		if err == nil && use != Idle && len(pids) == 0 {
			t.Errorf("use %q with no processes", use)
		}
	})
}
