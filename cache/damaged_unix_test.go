//go:build linux || darwin

package cache

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTooFewFileDescriptors opens a healthy cache, complete and partial,
// in a process allowed too few file descriptors: 0, 1, 2, ... more than
// it has open, each in a process of its own, up to the first limit at
// which the cache opens. Badger words most such refusals in text
// ("Error while opening key registry. err: open ...: too many open
// files"), which once passed for a damaged store: the open failed saying
// the cache was damaged, marked its manifest, and the next "cache prune
// --keep-last 5" deleted a good cache. Each failed open must be a plain
// error, not ErrDamaged; after each, the manifests must be unmarked and
// Prune must keep the caches; in the end they must read back whole.
//
// At some limits Badger used to end the process instead (log.Fatal when
// it could not open the store's directory or create its DISCARD file).
// The open now counts the descriptors it will need first
// (checkDescriptors) and refuses before Badger starts, so no limit may
// end the process.
func TestTooFewFileDescriptors(t *testing.T) {
	dir := t.TempDir()
	fillDay(t, dir, "complete", time.Now(), 0, 20)
	c := openT(t, dir, "partial", Options{})
	putN(t, c, 20)
	mustNil(t, c.Close())

	for _, fp := range []string{"complete", "partial"} {
		refused, opened := 0, false
		for more := 0; more < 64 && !opened; more++ {
			cmd := exec.Command(os.Args[0], "-test.run=^TestTooFewFileDescriptorsHelper$")
			cmd.Env = append(os.Environ(), "PIPERUN_NOFILE_DIR="+dir, "PIPERUN_NOFILE_FP="+fp,
				"PIPERUN_NOFILE_MORE="+strconv.Itoa(more))
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			text := out.String()
			switch {
			case err != nil:
				t.Fatalf("%s, %d more: helper: %v\n%s", fp, more, err, text)
			case strings.Contains(text, "refused: ") && strings.Contains(text, "too many open files"):
				refused++
				if strings.Contains(text, "DAMAGED") {
					t.Errorf("%s, %d more: running out of file descriptors was taken for damage:\n%s", fp, more, text)
				}
				// What a routine prune after the failed run sees.
				ms, err := List(dir)
				for _, m := range ms {
					if m.Damaged != "" {
						t.Errorf("%s, %d more: %s marked damaged: %s", fp, more, m.Fingerprint, m.Damaged)
					}
				}
				if removed, _, perr := Prune(dir, 0, 5, time.Now()); err != nil || perr != nil || len(removed) != 0 {
					t.Fatalf("%s, %d more: List: %v; Prune --keep-last 5 removed %+v (%v)", fp, more, err, removed, perr)
				}
			case strings.Contains(text, "opened\n"):
				opened = true
			default:
				t.Fatalf("%s, %d more: %s", fp, more, text)
			}
		}
		if refused == 0 || !opened {
			t.Fatalf("%s: %d opens refused for too many open files, opened in the end %v; want some refused, then one opened", fp, refused, opened)
		}
	}

	ms, err := List(dir)
	if err != nil || len(ms) != 2 {
		t.Fatalf("List = %+v, %v", ms, err)
	}
	for _, m := range ms {
		if m.Damaged != "" || m.Unreadable != "" || m.Samples != 20 {
			t.Errorf("%s: damaged %q, unreadable %q, %d samples; want a healthy cache of 20", m.Fingerprint, m.Damaged, m.Unreadable, m.Samples)
		}
	}
	removed, inUse, err := Prune(dir, 0, 5, time.Now())
	if err != nil || len(removed) != 0 || len(inUse) != 0 {
		t.Fatalf("Prune --keep-last 5 = %+v, %+v, %v; want nothing removed", removed, inUse, err)
	}
	for _, fp := range []string{"complete", "partial"} {
		c := openT(t, dir, fp, Options{})
		if c.Count() != 20 || c.Manifest().Complete != (fp == "complete") {
			t.Errorf("%s: %d samples, complete %v", fp, c.Count(), c.Manifest().Complete)
		}
		checkContents(t, c, 20)
		mustNil(t, c.Close())
	}
}

// TestTooFewFileDescriptorsHelper is not a test: TestTooFewFileDescriptors
// runs the test binary again to run it, so that the lowered limit is that
// process's alone. It opens the cache allowed PIPERUN_NOFILE_MORE file
// descriptors more than it has open, and prints "opened" or "refused: "
// and the error, with DAMAGED before it where it matched ErrDamaged.
func TestTooFewFileDescriptorsHelper(t *testing.T) {
	dir, fp := os.Getenv("PIPERUN_NOFILE_DIR"), os.Getenv("PIPERUN_NOFILE_FP")
	if dir == "" {
		t.Skip("helper for TestTooFewFileDescriptors")
	}
	more, err := strconv.ParseUint(os.Getenv("PIPERUN_NOFILE_MORE"), 10, 64)
	mustNil(t, err)
	fds, err := os.ReadDir("/dev/fd")
	mustNil(t, err)
	var orig syscall.Rlimit
	mustNil(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig))
	lim := orig
	lim.Cur = uint64(len(fds)-1) + more // less the one ReadDir had open
	mustNil(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim))
	c, err := Open(dir, fp, testMeta, Options{})
	mustNil(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig))
	if err == nil {
		mustNil(t, c.Close())
		fmt.Println("opened")
		return
	}
	mark := ""
	if errors.Is(err, ErrDamaged) {
		mark = "DAMAGED "
	}
	fmt.Printf("refused: %s%v\n", mark, err)
}
