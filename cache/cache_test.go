package cache

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4/skl"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/tensor"
)

// testSample builds a deterministic sample from its ID. Sizes vary so that
// some values stay in Badger's LSM tree and some go to the value log.
func testSample(id int64) *sample.Sample {
	n := int(id%7) * 400 // 0 … 2400 bytes, around the 1 KiB threshold
	img := tensor.New(tensor.Uint8, n)
	for i := range img.Data {
		img.Data[i] = byte(int64(i) * (id + 1))
	}
	return &sample.Sample{ID: id, Origin: fmt.Sprintf("rec %d", id), Fields: map[string]any{
		"image": img,
		"label": id % 10,
		"name":  strconv.FormatInt(id, 16),
		"w":     float64(id) / 3,
	}}
}

var testMeta = Manifest{Pipeline: "p", Stage: "cache", Describe: "range 0..n | map"}

func openT(t testing.TB, dir, fp string, opts Options) *Cache {
	t.Helper()
	c, err := Open(dir, fp, testMeta, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// collect iterates c and checks that IDs are 0..n-1 in order and that
// every sample equals testSample(id).
func checkContents(t *testing.T, c *Cache, n int64) {
	t.Helper()
	var next int64
	err := c.Iterate(context.Background(), func(s *sample.Sample) error {
		if s.ID != next {
			return fmt.Errorf("got sample %d, want %d", s.ID, next)
		}
		if !sameSample(s, testSample(next)) {
			return fmt.Errorf("sample %d differs from what was put", next)
		}
		next++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if next != n {
		t.Fatalf("iterated %d samples, want %d", next, n)
	}
}

func TestPutCommitReopen(t *testing.T) {
	dir := t.TempDir()
	c := openT(t, dir, "fp1", Options{BatchBytes: 10 << 10})
	for id := int64(0); id < 500; id++ {
		if err := c.Put(id, testSample(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	m := c.Manifest()
	if m.Samples != 500 || m.Complete || m.Fingerprint != "fp1" || m.Pipeline != "p" || m.Format != codecVersion {
		t.Fatalf("manifest after commit = %+v", m)
	}
	// Overwrites and re-puts of pending IDs do not change the count.
	for _, id := range []int64{3, 499, 3} {
		if err := c.Put(id, testSample(id)); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Count(); got != 500 {
		t.Fatalf("Count after overwrites = %d, want 500", got)
	}
	if !c.Has(0) || !c.Has(499) || c.Has(500) || c.Has(-1) {
		t.Fatal("Has disagrees with what was put")
	}
	if err := c.MarkComplete(); err != nil {
		t.Fatal(err)
	}
	bytesAtComplete := c.Manifest().Bytes
	if err := c.Put(500, testSample(500)); err == nil {
		t.Fatal("Put on a complete cache succeeded")
	}
	checkContents(t, c, 500)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	logs, err := filepath.Glob(filepath.Join(dir, "fp1", badgerName, "*.vlog"))
	if err != nil {
		t.Fatal(err)
	}

	// A complete cache reopens read-only: Badger neither scans its value
	// log nor starts another.
	c = openT(t, dir, "fp1", Options{})
	defer c.Close()
	if !c.readOnly {
		t.Error("a complete cache was reopened for writing")
	}
	if again, _ := filepath.Glob(filepath.Join(dir, "fp1", badgerName, "*.vlog")); len(again) != len(logs) {
		t.Errorf("value logs %v after a read-only open, want %v", again, logs)
	}
	m = c.Manifest()
	if !m.Complete || m.Samples != 500 || c.Count() != 500 || m.Bytes != bytesAtComplete {
		t.Fatalf("reopened manifest = %+v, count %d; want complete, 500 samples, %d bytes", m, c.Count(), bytesAtComplete)
	}
	var want int64
	for id := int64(0); id < 500; id++ {
		want += int64(len(Encode(nil, testSample(id))))
	}
	if m.Bytes != want {
		t.Fatalf("manifest bytes = %d, want %d", m.Bytes, want)
	}
	checkContents(t, c, 500)
}

func TestIncompleteResumes(t *testing.T) {
	dir := t.TempDir()
	c := openT(t, dir, "fp", Options{})
	for id := int64(0); id < 50; id++ {
		if err := c.Put(id, testSample(id)); err != nil {
			t.Fatal(err)
		}
	}
	// Close without Commit still keeps the samples: an interrupted pass is
	// resumable, not discarded.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = openT(t, dir, "fp", Options{})
	if c.Count() != 50 || c.Manifest().Complete {
		t.Fatalf("reopened: count %d, manifest %+v", c.Count(), c.Manifest())
	}
	for id := int64(40); id < 80; id++ { // overlaps what is stored
		if err := c.Put(id, testSample(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.MarkComplete(); err != nil {
		t.Fatal(err)
	}
	if c.Count() != 80 || c.Manifest().Samples != 80 {
		t.Fatalf("count %d, manifest %+v; want 80", c.Count(), c.Manifest())
	}
	checkContents(t, c, 80)
	c.Close()
}

func TestManifestDisagreement(t *testing.T) {
	dir := t.TempDir()
	c := openT(t, dir, "fp", Options{})
	for id := int64(0); id < 10; id++ {
		c.Put(id, testSample(id))
	}
	if err := c.MarkComplete(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	// A manifest claiming more samples than the keys hold is not trusted.
	m, err := readManifest(filepath.Join(dir, "fp"))
	if err != nil {
		t.Fatal(err)
	}
	m.Samples = 11
	if err := writeManifest(filepath.Join(dir, "fp"), m); err != nil {
		t.Fatal(err)
	}
	var logged []string
	c = openT(t, dir, "fp", Options{Logf: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }})
	defer c.Close()
	if got := c.Manifest(); got.Complete || got.Samples != 10 || c.Count() != 10 {
		t.Fatalf("manifest %+v, count %d; want incomplete with 10", got, c.Count())
	}
	if c.readOnly {
		t.Error("a cache found incomplete stayed read-only")
	}
	if len(logged) != 1 || !strings.Contains(logged[0], "treating it as incomplete") {
		t.Fatalf("logged %q", logged)
	}
}

func TestIterateStops(t *testing.T) {
	c := openT(t, t.TempDir(), "fp", Options{})
	defer c.Close()
	for id := int64(0); id < 100; id++ {
		c.Put(id, testSample(id))
	}
	stop := errors.New("stop")
	seen := 0
	err := c.Iterate(context.Background(), func(s *sample.Sample) error {
		seen++
		if seen == 5 {
			return stop
		}
		return nil
	})
	if err != stop || seen != 5 {
		t.Fatalf("Iterate = %v after %d samples, want stop after 5", err, seen)
	}
	ctx, cancel := context.WithCancel(context.Background())
	seen = 0
	err = c.Iterate(ctx, func(s *sample.Sample) error {
		seen++
		if seen == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || seen != 3 {
		t.Fatalf("Iterate = %v after %d samples, want context.Canceled after 3", err, seen)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	for _, fp := range []string{"", "..", "a/b", ".hidden", strings.Repeat("a", 129)} {
		if _, err := Open(dir, fp, Manifest{}, Options{}); err == nil {
			t.Errorf("Open(%q) succeeded", fp)
		}
	}
	c := openT(t, dir, "fp", Options{})
	c.Close()
	m, _ := readManifest(filepath.Join(dir, "fp"))
	m.Format = 99
	writeManifest(filepath.Join(dir, "fp"), m)
	if _, err := Open(dir, "fp", Manifest{}, Options{}); err == nil || !strings.Contains(err.Error(), "format 99") {
		t.Fatalf("Open of another format: %v", err)
	}
}

// TestHelperProcess is not a test: the tests below run the test binary
// again with PIPERUN_CACHE_HELPER set, to act as a second process.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv("PIPERUN_CACHE_HELPER")
	if mode == "" {
		t.Skip("helper for other tests")
	}
	dir := os.Getenv("PIPERUN_CACHE_DIR")
	c, err := Open(dir, "fp", testMeta, Options{BatchBytes: 16 << 10})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(3)
	}
	switch mode {
	case "complete":
		// Fill and complete the cache, then wait, database open, to be
		// killed: the state a preempted training run leaves.
		for id := int64(0); id < 20; id++ {
			if err := c.Put(id, testSample(id)); err != nil {
				fmt.Println("error:", err)
				os.Exit(3)
			}
		}
		if err := c.MarkComplete(); err != nil {
			fmt.Println("error:", err)
			os.Exit(3)
		}
		fmt.Println("complete")
		time.Sleep(time.Hour)
	case "hold":
		fmt.Println("open")
		// Hold the cache until the parent kills us.
		time.Sleep(time.Hour)
	case "write":
		for id := int64(0); ; id++ {
			if err := c.Put(id, testSample(id)); err != nil {
				fmt.Println("error:", err)
				os.Exit(3)
			}
			if (id+1)%100 == 0 {
				if err := c.Commit(); err != nil {
					fmt.Println("error:", err)
					os.Exit(3)
				}
				fmt.Println("committed", id+1)
			}
		}
	}
	os.Exit(0)
}

// startHelper runs the helper in mode and returns it with its stdout.
func startHelper(t *testing.T, dir, mode string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), "PIPERUN_CACHE_HELPER="+mode, "PIPERUN_CACHE_DIR="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, bufio.NewScanner(out)
}

// writeComplete fills the cache dir/fp with the test samples 0..n-1,
// completes it and closes it.
func writeComplete(t *testing.T, dir string, n int64) {
	t.Helper()
	c := openT(t, dir, "fp", Options{})
	putN(t, c, n)
	if err := c.MarkComplete(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// mustNil fails the test on err.
func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// putN puts the test samples 0..n-1.
func putN(t *testing.T, c *Cache, n int64) {
	t.Helper()
	for id := range n {
		if err := c.Put(id, testSample(id)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCompleteCacheIsShared: processes that only read a complete cache
// share it (a data-parallel job's ranks reading one cache), and a process
// that would remove it meanwhile is refused.
func TestCompleteCacheIsShared(t *testing.T) {
	dir := t.TempDir()
	writeComplete(t, dir, 20)
	cmd, out := startHelper(t, dir, "hold")
	if !out.Scan() || out.Text() != "open" {
		t.Fatalf("helper said %q", out.Text())
	}
	c, err := Open(dir, "fp", testMeta, Options{})
	if err != nil {
		t.Fatalf("Open of a complete cache another process reads: %v", err)
	}
	if !c.readOnly || !c.shared {
		t.Errorf("readOnly %v, shared %v; want both", c.readOnly, c.shared)
	}
	checkContents(t, c, 20)
	want := fmt.Sprintf("cache: %s is being read by other piperun processes", filepath.Join(dir, "fp"))
	if err := Remove(dir, "fp"); err == nil || err.Error() != want {
		t.Fatalf("Remove of a cache being read = %v, want %q", err, want)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Remove(dir, "fp"); err != nil {
		t.Fatalf("Remove after the readers closed: %v", err)
	}
}

// TestWriterSharesOnceComplete: a process that filled a cache lets readers
// in as soon as it is complete, while it goes on reading it.
func TestWriterSharesOnceComplete(t *testing.T) {
	dir := t.TempDir()
	w := openT(t, dir, "fp", Options{})
	defer w.Close()
	putN(t, w, 20)
	if _, err := Open(dir, "fp", testMeta, Options{}); err == nil {
		t.Fatal("a cache being filled was opened twice")
	}
	if err := w.MarkComplete(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir, "fp", testMeta, Options{})
	if err != nil {
		t.Fatalf("Open of a cache its writer completed: %v", err)
	}
	defer r.Close()
	checkContents(t, r, 20)
	checkContents(t, w, 20)
}

// TestExclusiveOpenOfACompleteCacheShares: a process that took the
// exclusive lock of a cache that turned out complete (it became complete
// after the process looked) shares it, rather than keeping the others out
// for its whole run.
func TestExclusiveOpenOfACompleteCacheShares(t *testing.T) {
	dir := t.TempDir()
	writeComplete(t, dir, 5)
	c, err := openExclusive(filepath.Join(dir, "fp"), "fp", testMeta, Options{}.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.readOnly || !c.shared {
		t.Errorf("readOnly %v, shared %v; want both", c.readOnly, c.shared)
	}
	start := time.Now()
	r, err := Open(dir, "fp", testMeta, Options{})
	if err != nil {
		t.Fatalf("Open beside it: %v (after %v)", err, time.Since(start))
	}
	defer r.Close()
	checkContents(t, r, 5)
}

// TestReadersAfterACrash: a writer killed after completing its cache leaves
// Badger with a log to truncate, which a read-only open refuses. Readers
// that start together then (the ranks of a restarted job) all get in: one
// repairs the cache and shares it, the others wait for it.
func TestReadersAfterACrash(t *testing.T) {
	dir := t.TempDir()
	w, out := startHelper(t, dir, "complete")
	if !out.Scan() || out.Text() != "complete" {
		t.Fatalf("helper said %q", out.Text())
	}
	w.Process.Kill()
	w.Wait()
	var outs []*bufio.Scanner
	for range 3 {
		_, o := startHelper(t, dir, "hold")
		outs = append(outs, o)
	}
	c, err := Open(dir, "fp", testMeta, Options{})
	if err != nil {
		t.Fatalf("Open in this process: %v", err)
	}
	defer c.Close()
	checkContents(t, c, 20)
	for i, o := range outs {
		if !o.Scan() || o.Text() != "open" {
			t.Errorf("reader %d said %q", i, o.Text())
		}
	}
	if !c.readOnly || !c.shared {
		t.Errorf("readOnly %v, shared %v; want both", c.readOnly, c.shared)
	}
}

func TestInUseByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	cmd, out := startHelper(t, dir, "hold")
	if !out.Scan() || out.Text() != "open" {
		t.Fatalf("helper said %q", out.Text())
	}
	_, err := Open(dir, "fp", testMeta, Options{})
	want := fmt.Sprintf("cache: %s is in use by another piperun process (pid %d)", filepath.Join(dir, "fp"), cmd.Process.Pid)
	if err == nil || err.Error() != want {
		t.Fatalf("Open while held = %v, want %q", err, want)
	}
	// List reads manifests of open caches; Prune and Remove leave them.
	ms, err := List(dir)
	if err != nil || len(ms) != 1 || ms[0].Fingerprint != "fp" {
		t.Fatalf("List = %+v, %v", ms, err)
	}
	removed, inUse, err := Prune(dir, 0, 0, time.Now().Add(time.Hour))
	if err != nil || len(removed) != 0 || len(inUse) != 1 || inUse[0].Fingerprint != "fp" {
		t.Fatalf("Prune removed %+v, kept in use %+v, %v; want nothing removed, fp kept", removed, inUse, err)
	}
	if err := Remove(dir, "fp"); err == nil || err.Error() != want {
		t.Fatalf("Remove while held = %v, want %q", err, want)
	}
	// Once the holder dies, the kernel drops its lock.
	cmd.Process.Kill()
	cmd.Wait()
	c := openT(t, dir, "fp", Options{})
	c.Close()
}

func TestCrash(t *testing.T) {
	dir := t.TempDir()
	cmd, out := startHelper(t, dir, "write")
	var committed int64
	for out.Scan() {
		line := out.Text()
		n, ok := strings.CutPrefix(line, "committed ")
		if !ok {
			t.Fatalf("helper said %q", line)
		}
		committed, _ = strconv.ParseInt(n, 10, 64)
		if committed >= 1500 {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// The child may have committed more after the line we read; it cannot
	// have fewer.
	c := openT(t, dir, "fp", Options{})
	defer c.Close()
	n := c.Count()
	if n < committed {
		t.Fatalf("Count after kill = %d, want at least %d", n, committed)
	}
	if m := c.Manifest(); m.Samples != n || m.Complete {
		t.Fatalf("manifest %+v, want %d samples, incomplete", m, n)
	}
	checkContents(t, c, n)
	t.Logf("child committed %d before the kill; %d samples survived", committed, n)
}

func TestListPruneRemove(t *testing.T) {
	dir := t.TempDir()
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, fp := range []string{"a", "b", "c", "d"} {
		now := base.Add(time.Duration(i) * 24 * time.Hour)
		c, err := Open(dir, fp, Manifest{Pipeline: "p", Stage: "s"}, Options{Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	os.Mkdir(filepath.Join(dir, "not-a-cache"), 0o755)
	ms, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var fps []string
	for _, m := range ms {
		fps = append(fps, m.Fingerprint)
	}
	if strings.Join(fps, ",") != "d,c,b,a" {
		t.Fatalf("List order = %v, want d,c,b,a", fps)
	}
	// Now is day 5: a (day 0) and b (day 1) are older than 3 days; keepLast
	// 3 protects b, c and d whatever their age.
	now := base.Add(5 * 24 * time.Hour)
	removed, _, err := Prune(dir, 3*24*time.Hour, 3, now)
	if err != nil || len(removed) != 1 || removed[0].Fingerprint != "a" {
		t.Fatalf("Prune = %+v, %v; want a", removed, err)
	}
	removed, _, err = Prune(dir, 3*24*time.Hour, 1, now)
	if err != nil || len(removed) != 1 || removed[0].Fingerprint != "b" {
		t.Fatalf("Prune = %+v, %v; want b", removed, err)
	}
	if err := Remove(dir, "c"); err != nil {
		t.Fatal(err)
	}
	if err := Remove(dir, "c"); err != nil {
		t.Fatalf("removing a missing cache: %v", err)
	}
	ms, _ = List(dir)
	if len(ms) != 1 || ms[0].Fingerprint != "d" {
		t.Fatalf("left %+v, want d", ms)
	}
	if ms, err := List(filepath.Join(dir, "missing")); err != nil || ms != nil {
		t.Fatalf("List(missing) = %v, %v", ms, err)
	}
}

func TestMemoryBytes(t *testing.T) {
	got := Options{}.MemoryBytes()
	// Recomputed by hand from the formula in the doc comment.
	node := int64(skl.MaxNodeSize)
	batch := int64(15 * (4 << 20) / 100)
	arena := int64(4<<20) + batch + batch/node*node
	want := 4*arena + arena + (6*(4<<20) + 16*(1<<20)) + 2*(4<<20) + 8<<20
	if got != want {
		t.Fatalf("MemoryBytes = %d, want %d", got, want)
	}
	if bigger := (Options{MemTableSize: 8 << 20}).MemoryBytes(); bigger <= got {
		t.Fatalf("doubling memtables gave %d ≤ %d", bigger, got)
	}
}

// TestPutRefusesWhatBadgerCannotHold: a sample larger than a value log file
// is refused at Put, in words, and the cache goes on taking the others;
// Badger refused it at the commit, with the value's bytes in hex in its
// message, and the samples pending with it unwritten.
func TestPutRefusesWhatBadgerCannotHold(t *testing.T) {
	defer func(m int64) { maxValueBytes = m }(maxValueBytes)
	maxValueBytes = 1 << 20
	c := openT(t, t.TempDir(), "fp", Options{})
	defer c.Close()
	if err := c.Put(0, testSample(0)); err != nil {
		t.Fatal(err)
	}
	big := &sample.Sample{ID: 1, Fields: map[string]any{"image": tensor.New(tensor.Uint8, 2<<20)}}
	err := c.Put(1, big)
	const want = "cache: sample 1 takes at least 2.0 MiB stored, more than the 1 MiB a disk cache holds for one sample (Badger's value log file): cache below a stage that makes samples smaller, or in memory (no dir:)"
	if err == nil || err.Error() != want {
		t.Fatalf("Put of 2 MiB: %v\nwant %s", err, want)
	}
	// Just under the limit in values, over it once encoded (names and
	// headers): refused after encoding.
	edge := &sample.Sample{ID: 3, Fields: map[string]any{"image": tensor.New(tensor.Uint8, 1<<20-4)}}
	const wantEdge = "cache: sample 3 takes 1.0 MiB stored, more than the 1 MiB a disk cache holds for one sample (Badger's value log file): cache below a stage that makes samples smaller, or in memory (no dir:)"
	if err := c.Put(3, edge); err == nil || err.Error() != wantEdge {
		t.Fatalf("Put of 1 MiB less 4 bytes: %v\nwant %s", err, wantEdge)
	}
	if err := c.Put(2, testSample(2)); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := c.Count(); n != 2 {
		t.Errorf("%d samples stored, want 2", n)
	}
	for _, id := range []int64{0, 2} {
		if s, ok, err := c.Get(id); err != nil || !ok || !sameSample(s, testSample(id)) {
			t.Errorf("sample %d: %v, %v", id, ok, err)
		}
	}
}

// TestNoRoomToWrite: a cache stops with an error naming its folder and
// the room it needs before Badger writes into files it maps into memory
// on a disk that cannot back them (a fill on a full tmpfs ended the
// process with SIGBUS, no error, no report).
func TestNoRoomToWrite(t *testing.T) {
	dir := t.TempDir()
	real := freeBytes
	t.Cleanup(func() { freeBytes = real })
	free := int64(1 << 30)
	freeBytes = func(string) (int64, error) { return free, nil }
	c := openT(t, dir, "fp1", Options{BatchBytes: 10 << 10})
	defer c.Close()
	if err := c.Put(0, testSample(0)); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(); err != nil {
		t.Fatalf("commit with 1GiB free: %v", err)
	}
	free = 20 << 20
	var err error
	for id := int64(1); id < 200 && err == nil; id++ {
		err = c.Put(id, testSample(id))
	}
	if err == nil {
		err = c.Commit()
	}
	// The need is the batch (10KiB here, or a little more), the three
	// memtables' 12MiB and the margin's 16MiB.
	want := regexp.MustCompile(`^cache: ` + regexp.QuoteMeta(filepath.Join(dir, "fp1")) + `: the disk has 20MiB free, less than the 28\.0[0-9]MiB a cache needs to write on \(Badger maps its files into memory, and a full disk would end the process with SIGBUS\): free some space, or set the cache's dir on another disk$`)
	if err == nil || !want.MatchString(err.Error()) {
		t.Errorf("writing with 20MiB free: %v\nwant %s", err, want)
	}
}

// TestListFindsACacheWhoseManifestWasDeleted: a cache folder holding a
// Badger store but no manifest.json (deleted by hand; Open writes the
// manifest before the store) is listed as damaged and pruned, instead of
// hiding its disk space from ls and prune for good. An empty folder with
// a fingerprint's name is still no cache.
func TestListFindsACacheWhoseManifestWasDeleted(t *testing.T) {
	dir := t.TempDir()
	c := openT(t, dir, "orphan", Options{})
	for id := int64(0); id < 3; id++ {
		if err := c.Put(id, testSample(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := os.Remove(filepath.Join(dir, "orphan", manifestName)); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	ms, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := "no manifest.json beside its Badger store (deleted?): nothing says what it holds"
	if len(ms) != 1 || ms[0].Fingerprint != "orphan" || ms[0].Damaged != want {
		t.Fatalf("List = %+v\nwant orphan, damaged %q", ms, want)
	}
	removed, inUse, err := Prune(dir, time.Hour, 5, time.Now())
	if err != nil || len(inUse) != 0 || len(removed) != 1 || removed[0].Fingerprint != "orphan" {
		t.Fatalf("Prune = %+v, %+v, %v; want orphan removed", removed, inUse, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "orphan")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("orphan still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "empty")); err != nil {
		t.Fatalf("the empty folder was removed: %v", err)
	}
}
