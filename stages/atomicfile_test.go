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

	"github.com/piperun/piperun/spec"
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
	// The process's own open files: /dev/stdout into a log opened with >>
	// replaced the log.
	if runtime.GOOS == "linux" {
		for _, p := range []string{"/dev/stdout", "/dev/fd/1", "/proc/self/fd/2"} {
			cases = append(cases, struct{ path, want string }{p, p + " is one of this process's open files"})
		}
	}
	// A folder that is a link to nowhere cannot be made: validate passed
	// it, and the run failed with "mkdir: file exists".
	if err := os.Symlink("nowhere/dir", filepath.Join(dir, "dl")); err == nil {
		link := filepath.Join(dir, "dl")
		cases = append(cases,
			struct{ path, want string }{filepath.Join(link, "o.jsonl"), "output directory " + link + " cannot be made: " + link + " is a link to nowhere/dir, which does not exist"},
			struct{ path, want string }{filepath.Join(link, "x", "o.jsonl"), "output directory " + filepath.Join(link, "x") + " cannot be made: " + link + " is a link to nowhere/dir, which does not exist"})
		if err := MkdirAll(filepath.Join(link, "x")); err == nil || err.Error() != link+" is a link to nowhere/dir, which does not exist" {
			t.Errorf("MkdirAll below a link to nowhere: %v", err)
		}
		// A chain is named to its end; a loop, as a loop.
		chain, la, lb := filepath.Join(dir, "dl2"), filepath.Join(dir, "la"), filepath.Join(dir, "lb")
		mustOK(t, os.Symlink("dl", chain))
		mustOK(t, os.Symlink("lb", la))
		mustOK(t, os.Symlink("la", lb))
		cases = append(cases,
			struct{ path, want string }{filepath.Join(chain, "o.jsonl"), "output directory " + chain + " cannot be made: " + chain + " is a link to dl, which leads to " + filepath.Join(dir, "nowhere/dir") + ", which does not exist"},
			struct{ path, want string }{filepath.Join(la, "o.jsonl"), "output directory " + la + " cannot be made: " + la + " is a loop of symbolic links"})
		if err := MkdirAll(filepath.Join(la, "x")); err == nil || err.Error() != la+" is a loop of symbolic links" {
			t.Errorf("MkdirAll below a loop of links: %v", err)
		}
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
// another output's (38 MB stayed after a later
// successful run).
func TestStaleTemporariesAreRemoved(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("process IDs as on Linux")
	}
	dir := t.TempDir()
	dead := deadPID(t)
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
		fmt.Sprintf(".out.jsonl.tmp-%d-456", os.Getppid()): true,  // alive, its flock held
		fmt.Sprintf(".other.jsonl.tmp-%d-789", dead):       true,  // another output
		"out.jsonl.tmp-1-2":                                true,  // not ours
		// A live process's ID, reused: no flock, so a dead writer's (a
		// review: pid 1 kept it, and refused every later run).
		".out.jsonl.tmp-1-3": false,
	}
	for name := range files {
		mustOK(t, os.WriteFile(filepath.Join(dir, name), []byte("partial"), 0o644))
	}
	held := lockTemp(filepath.Join(dir, fmt.Sprintf(".out.jsonl.tmp-%d-456", os.Getppid())))
	if held == nil {
		t.Fatal("no flock")
	}
	defer held.Close()
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

// deadPID is the ID of a process that has exited: free, until reused.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	mustOK(t, cmd.Run())
	return cmd.Process.Pid
}

// procState is the start of /proc/pid/stat, with the state after the name.
func procState(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return string(b[:min(len(b), 40)])
}

// TestShardsListTheirFolderOnce: a sink of many shards lists its folder
// once to remove the temporaries of dead writers, and removes each
// shard's: 4000 shards listed it 4000 times, 12 s before the run began.
func TestShardsListTheirFolderOnce(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("process IDs as on Linux")
	}
	dir := t.TempDir()
	dead := deadPID(t)
	for i := range 3 {
		name := fmt.Sprintf(".s-%05d-of-00003.tfrecord.tmp-%d-1", i, dead)
		mustOK(t, os.WriteFile(filepath.Join(dir, name), []byte("partial"), 0o644))
	}
	lists := 0
	readDir = func(name string) ([]os.DirEntry, error) { lists++; return os.ReadDir(name) }
	defer func() { readDir = os.ReadDir }()
	sp, diags := spec.Parse(filepath.Join(dir, "s.yaml"), []byte("version: 1\nname: s\nstages:\n  - {name: r, type: range, count: 3}\n  - {name: w, type: write_tfrecord, path: 's-{shard}-of-{shards}.tfrecord', shards: 3}\n"), spec.Options{Catalog: Default()})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	sink, err := buildWriteTFRecord(&Env{Spec: sp, Stage: sp.Stages[1]}, sp.Stages[1].Config)
	mustOK(t, err)
	defer sink.(*tfrecordSink).Abort()
	ents, err := os.ReadDir(dir)
	mustOK(t, err)
	for _, e := range ents {
		if strings.Contains(e.Name(), fmt.Sprintf(".tmp-%d-", dead)) {
			t.Errorf("%s stayed", e.Name())
		}
	}
	if lists != 1 {
		t.Errorf("the folder was listed %d times for 3 shards, want once", lists)
	}
}

// TestShardsOfAnotherWriterAreRefused: a set of shards another live
// process is writing is refused when the sink is made, and at its commit
// where the other began after it: two runs committing together left a set
// mixed from both, both exiting 0 (a test of concurrent runs).
func TestShardsOfAnotherWriterAreRefused(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("process IDs as on Linux")
	}
	dir := t.TempDir()
	live := os.Getppid() // the test binary's parent: alive
	sp, diags := spec.Parse(filepath.Join(dir, "s.yaml"), []byte("version: 1\nname: s\nstages:\n  - {name: r, type: range, count: 3}\n  - {name: w, type: write_tfrecord, path: 's-{shard}.tfrecord', shards: 3}\n"), spec.Options{Catalog: Default()})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	build := func() (*tfrecordSink, error) {
		sink, err := buildWriteTFRecord(&Env{Spec: sp, Stage: sp.Stages[1]}, sp.Stages[1].Config)
		if err != nil {
			return nil, err
		}
		return sink.(*tfrecordSink), nil
	}
	other := filepath.Join(dir, fmt.Sprintf(".s-00001.tfrecord.tmp-%d-7", live))
	want := fmt.Sprintf("another process (pid %d) is writing %s (its temporary file %s): committing beside it would leave a set of shards mixed from both runs; run one at a time, or write elsewhere", live, filepath.Join(dir, "s-00001.tfrecord"), other)
	// write makes the other writer's temporary file, holding its flock.
	write := func() *os.File {
		mustOK(t, os.WriteFile(other, nil, 0o644))
		f := lockTemp(other)
		if f == nil {
			t.Fatal("no flock")
		}
		return f
	}

	held := write()
	if _, err := build(); err == nil || err.Error() != want {
		t.Errorf("made beside another writer: %v\nwant %s", err, want)
	}
	held.Close()
	mustOK(t, os.Remove(other))

	sink, err := build()
	mustOK(t, err)
	held = write() // another run begins
	if err := sink.Prepare(); err == nil || err.Error() != want {
		t.Errorf("committed beside another writer: %v\nwant %s", err, want)
	}
	mustOK(t, sink.Abort())
	if _, err := os.Stat(filepath.Join(dir, "s-00000.tfrecord")); !os.IsNotExist(err) {
		t.Errorf("a shard was committed: %v", err)
	}
	held.Close()
	mustOK(t, os.Remove(other))

	// Prepared, it commits whatever begins after (refusing then would
	// leave other sinks' outputs committed and not this one's).
	sink, err = build()
	mustOK(t, err)
	mustOK(t, sink.Prepare())
	held = write()
	mustOK(t, sink.Commit())
	held.Close()
	mustOK(t, os.Remove(other))

	// One whose writer is dead, its ID reused by a live process, is no
	// writer: it is removed (pid 1 refused every run).
	mustOK(t, os.WriteFile(other, nil, 0o644))
	sink, err = build()
	mustOK(t, err)
	mustOK(t, sink.Commit())
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Errorf("a dead writer's temporary file stayed: %v", err)
	}
}

// TestFileName: an output path naming a folder, or whose name with the
// temporary file's beside it is longer than a file system takes, is
// refused at validate time (the run wrote a file named after the folder,
// or failed at its first sample).
func TestFileName(t *testing.T) {
	long := strings.Repeat("a", 230)
	for _, tc := range []struct{ path, want string }{
		{"out/o.jsonl", ""},
		{"out/dir/", `path "out/dir/" names a folder, not a file`},
		{"out/dir/.", `path "out/dir/." names a folder, not a file`},
		{"..", `path ".." names a folder, not a file`},
		{"out/" + long[:225] + ".json", ""},
		{"out/" + long[:226] + ".json", ""}, // 231 bytes: .NAME.tmp-PID-N is 255
		{"out/" + long[:227] + ".json", `file name "` + long[:227] + `.json" is 232 bytes, more than the 231 the run can use (the file is written aside, as .NAME.tmp-PID-N, within 255)`},
		{"out/" + long + ".json", `file name "` + long + `.json" is 235 bytes, more than the 231 the run can use (the file is written aside, as .NAME.tmp-PID-N, within 255)`},
	} {
		msg := ""
		if err := FileName(tc.path); err != nil {
			msg = err.Error()
		}
		if msg != tc.want {
			t.Errorf("FileName(%.40q) = %q, want %q", tc.path, msg, tc.want)
		}
	}
}

// TestKeptAsideLooksTemporaryAndIsHeld: the hard link commitAll keeps of
// a file it replaces is named as a temporary file is, so a files stage
// passes over one a killed commit left (a review read it as an extra
// shard: 40 samples of 30), and it is locked while its run lives, so
// another run writing the same output does not sweep it away from under
// a rollback.
func TestKeptAsideLooksTemporaryAndIsHeld(t *testing.T) {
	dir := t.TempDir()
	final := filepath.Join(dir, "part-00001.tfrecord")
	if err := os.WriteFile(final, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	old, lock, err := keepAside(final)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if !tempName.MatchString(filepath.Base(old)) {
		t.Errorf("kept aside as %s, which a files stage would read", old)
	}
	if b, err := os.ReadFile(old); err != nil || string(b) != "old" {
		t.Errorf("kept aside: %q, %v", b, err)
	}
	if runtime.GOOS != "windows" && !tempHeld(old, os.Getpid()+1) {
		t.Errorf("%s is not held while its run lives", old)
	}
}
