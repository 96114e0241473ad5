package stages

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestCheckWritable: the directory a sink would write to, or the one it
// would be made in, is named with what stands in the way.
func TestCheckWritable(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ path, want string }{
		{filepath.Join(dir, "out.jsonl"), ""},
		{filepath.Join(dir, "new", "deeper", "out.jsonl"), ""},
		{filepath.Join(file, "out.jsonl"), file + " is not a directory"},
		// An output whose name is taken by a directory: rename would say
		// only "file exists", at the end of the run.
		{dir, dir + " is a directory"},
	}
	if runtime.GOOS == "linux" {
		cases = append(cases, struct{ path, want string }{"/proc/nope/x", "output directory /proc/nope cannot be made in /proc: "})
	}
	for _, tc := range cases {
		err := checkWritable(tc.path)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)) {
			t.Errorf("checkWritable(%s) = %v, want %q", tc.path, err, tc.want)
		}
	}
	if runtime.GOOS == "linux" {
		// serve's unix socket: the directory is named as a socket's.
		want := "socket directory /proc is not writable: "
		if err := checkDirFor("/proc/x.sock", "socket directory"); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("checkDirFor(/proc/x.sock) = %v, want %q", err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); !os.IsNotExist(err) {
		t.Errorf("the check made a directory: %v", err)
	}
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestStaleTemporariesAreRemoved: a run killed with kill -9 leaves its
// hidden temporary beside the output; the next run writing that output
// removes it, whatever its size, but not one whose writer is alive, nor
// another output's (found by a new-user test: 38 MB stayed after a later
// successful run).
func TestStaleTemporariesAreRemoved(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("process IDs as on Linux")
	}
	dir := t.TempDir()
	// A process that has exited: its ID is free (until reused).
	cmd := exec.Command("true")
	mustOK(t, cmd.Run())
	dead := cmd.Process.Pid
	// One that has exited and is not reaped yet: a zombie, as a writer
	// killed with its parent (timeout -s KILL) is until init reaps it.
	zcmd := exec.Command("true")
	mustOK(t, zcmd.Start())
	defer zcmd.Wait()
	zombie := zcmd.Process.Pid
	for i := 0; !strings.Contains(procState(zombie), ") Z"); i++ {
		if i == 500 {
			t.Fatalf("process %d did not become a zombie: %q", zombie, procState(zombie))
		}
		time.Sleep(10 * time.Millisecond)
	}
	files := map[string]bool{ // name -> kept
		fmt.Sprintf(".out.jsonl.tmp-%d-123", dead):         false,
		fmt.Sprintf(".out.jsonl.tmp-%d-124", zombie):       false,
		".out.jsonl.tmp-3926397686":                        false, // the old naming
		fmt.Sprintf(".out.jsonl.tmp-%d-456", os.Getppid()): true,  // alive
		fmt.Sprintf(".other.jsonl.tmp-%d-789", dead):       true,  // another output
		"out.jsonl.tmp-1-2":                                true,  // not ours
	}
	for name := range files {
		mustOK(t, os.WriteFile(filepath.Join(dir, name), []byte("partial"), 0o644))
	}
	f, err := createAtomic(filepath.Join(dir, "out.jsonl"))
	mustOK(t, err)
	mustOK(t, f.commit())
	for name, kept := range files {
		_, err := os.Stat(filepath.Join(dir, name))
		if kept != (err == nil) {
			t.Errorf("%s: kept %v, want %v", name, err == nil, kept)
		}
	}
}

// procState is the start of /proc/pid/stat, with the state after the name.
func procState(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return string(b[:min(len(b), 40)])
}
