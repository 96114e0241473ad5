package cache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/piperun/piperun/sample"
)

// fillDay opens dir/fp as of day i after base, puts n test samples,
// completes it and closes it.
func fillDay(t *testing.T, dir, fp string, base time.Time, i int, n int64) {
	t.Helper()
	now := base.Add(time.Duration(i) * 24 * time.Hour)
	c, err := Open(dir, fp, Manifest{Pipeline: "p", Stage: fp}, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	putN(t, c, n)
	if err := c.MarkComplete(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// damagedMessage is DamagedError's text for the cache dir/fp.
func damagedMessage(dir, fp, reason string) string {
	path := filepath.Join(dir, fp)
	return "cache " + path + " is damaged: " + reason + "; remove it (rm -r " + path + `) or run "piperun cache prune ` +
		dir + ` --damaged", then run again to refill it`
}

// TestDamagedManifest replaces one real cache's manifest with garbage and
// another's with a manifest naming some other fingerprint: Open refuses
// each with a DamagedError naming the file, List still lists every cache,
// the damaged ones marked, and Prune removes the damaged ones whatever
// their age, keeping the keepLast healthy ones.
func TestDamagedManifest(t *testing.T) {
	dir := t.TempDir()
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, fp := range []string{"old", "garbage", "misnamed", "new"} {
		fillDay(t, dir, fp, base, i, 5)
	}
	garbage := filepath.Join(dir, "garbage", manifestName)
	if err := os.WriteFile(garbage, []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	misnamedMan, err := readManifest(filepath.Join(dir, "misnamed"))
	if err != nil {
		t.Fatal(err)
	}
	misnamedMan.Fingerprint = "elsewhere"
	if err := writeManifest(filepath.Join(dir, "misnamed"), misnamedMan); err != nil {
		t.Fatal(err)
	}

	parse := "manifest " + garbage + " does not parse (invalid character 'g' looking for beginning of value)"
	misnamedWhy := "manifest " + filepath.Join(dir, "misnamed", manifestName) + ` names fingerprint "elsewhere", not "misnamed"`
	for fp, reason := range map[string]string{"garbage": parse, "misnamed": misnamedWhy} {
		_, err := Open(dir, fp, testMeta, Options{})
		if !errors.Is(err, ErrDamaged) {
			t.Fatalf("Open(%s): %v, want ErrDamaged", fp, err)
		}
		if want := damagedMessage(dir, fp, reason); err.Error() != want {
			t.Errorf("Open(%s):\n%s\nwant\n%s", fp, err, want)
		}
	}
	if b, err := os.ReadFile(garbage); err != nil || string(b) != "garbage\n" {
		t.Errorf("Open rewrote the damaged manifest: %q, %v", b, err)
	}

	ms, err := List(dir)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	got := map[string]Manifest{}
	for _, m := range ms {
		got[m.Fingerprint] = m
	}
	if len(ms) != 4 || got["old"].Damaged != "" || got["new"].Damaged != "" || !got["new"].Complete ||
		got["garbage"].Damaged != parse || got["misnamed"].Damaged != misnamedWhy {
		t.Fatalf("List = %+v", ms)
	}
	// An unreadable manifest's file time stands in for when it was used.
	if fi, err := os.Stat(garbage); err != nil || !got["garbage"].LastUsed.Equal(fi.ModTime()) {
		t.Errorf("garbage LastUsed %v, want the file's time (%v)", got["garbage"].LastUsed, err)
	}

	// On day 10, with no age limit to speak of, keeping the last healthy
	// one: the damaged ones go, and so does "old", the second healthy
	// one; damaged ones are not counted among the kept.
	removed, inUse, err := Prune(dir, 365*24*time.Hour, 1, base.Add(10*24*time.Hour))
	if err != nil || len(inUse) != 0 {
		t.Fatalf("Prune: %v, in use %+v", err, inUse)
	}
	var names []string
	for _, m := range removed {
		names = append(names, m.Fingerprint)
	}
	if strings.Join(names, ",") != "garbage,misnamed" {
		t.Errorf("Prune removed %v, want garbage and misnamed", names)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(left) != 2 || filepath.Base(left[0]) != "new" || filepath.Base(left[1]) != "old" {
		t.Errorf("left %v, want new and old", left)
	}
	removed, _, err = Prune(dir, 0, 1, base.Add(10*24*time.Hour))
	if err != nil || len(removed) != 1 || removed[0].Fingerprint != "old" {
		t.Errorf("second Prune = %+v, %v; want old", removed, err)
	}
}

// TestDamagedCacheInUseIsKept: Prune never removes a cache a process
// holds, damaged or not.
func TestDamagedCacheInUseIsKept(t *testing.T) {
	dir := t.TempDir()
	writeComplete(t, dir, 5)
	c := openT(t, dir, "fp", Options{}) // complete: held shared, as a reader
	defer c.Close()
	if err := os.WriteFile(filepath.Join(dir, "fp", manifestName), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	removed, inUse, err := Prune(dir, 0, 0, time.Now())
	if err != nil || len(removed) != 0 || len(inUse) != 1 || inUse[0].Fingerprint != "fp" || inUse[0].Damaged == "" {
		t.Fatalf("Prune = %+v, %+v, %v; want fp kept, in use", removed, inUse, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "fp", badgerName)); err != nil {
		t.Errorf("the cache in use lost its store: %v", err)
	}
}

// TestMissingTableFile deletes the table file of a real cache: Open fails
// with a DamagedError naming the store instead of Badger's bare "file does
// not exist for table 1", and records the damage in the manifest, so that
// List shows it and Prune removes it whatever its age. A cache whose
// store opens again is no longer marked.
func TestMissingTableFile(t *testing.T) {
	dir := t.TempDir()
	writeComplete(t, dir, 20)
	store := filepath.Join(dir, "fp", badgerName)
	tables, err := filepath.Glob(filepath.Join(store, "*.sst"))
	if err != nil || len(tables) != 1 || filepath.Base(tables[0]) != "000001.sst" {
		t.Fatalf("table files %v (%v), want 000001.sst alone", tables, err)
	}
	saved, err := os.ReadFile(tables[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(tables[0]); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, "fp", testMeta, Options{})
	reason := "its Badger store " + store + " does not open (file does not exist for table 1)"
	if !errors.Is(err, ErrDamaged) || err.Error() != damagedMessage(dir, "fp", reason) {
		t.Fatalf("Open: %v\nwant %s", err, damagedMessage(dir, "fp", reason))
	}
	ms, err := List(dir)
	if err != nil || len(ms) != 1 || ms[0].Damaged != reason || ms[0].Samples != 20 || ms[0].Pipeline != "p" {
		t.Fatalf("List = %+v, %v; want fp marked damaged, its counts kept", ms, err)
	}

	// Put back, the store opens, and the mark goes.
	if err := os.WriteFile(tables[0], saved, 0o644); err != nil {
		t.Fatal(err)
	}
	c := openT(t, dir, "fp", Options{})
	checkContents(t, c, 20)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if ms, _ := List(dir); len(ms) != 1 || ms[0].Damaged != "" {
		t.Fatalf("after repair List = %+v", ms)
	}

	if err := os.Remove(tables[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, "fp", testMeta, Options{}); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Open: %v", err)
	}
	// Used just now, yet removed: a damaged cache has no age worth keeping.
	removed, _, err := Prune(dir, 24*time.Hour, 5, time.Now())
	if err != nil || len(removed) != 1 || removed[0].Damaged != reason {
		t.Fatalf("Prune = %+v, %v", removed, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "fp")); !os.IsNotExist(err) {
		t.Errorf("fp is still there: %v", err)
	}
}

// TestMissingValueLog deletes the value log of a real cache holding big
// samples. Badger opens it and hands back empty values: the first read
// reports the sample corrupt, naming the missing file among the causes,
// and marks the cache damaged for List and Prune.
func TestMissingValueLog(t *testing.T) {
	dir := t.TempDir()
	c := openT(t, dir, "fp", Options{})
	for id := int64(0); id < corruptN; id++ {
		if err := c.Put(id, bigSample(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.MarkComplete(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	logs, err := filepath.Glob(filepath.Join(dir, "fp", badgerName, "*.vlog"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no value log: %v", err)
	}
	for _, l := range logs {
		if err := os.Remove(l); err != nil {
			t.Fatal(err)
		}
	}
	c = openT(t, dir, "fp", Options{})
	err = c.Iterate(context.Background(), func(*sample.Sample) error { return nil })
	checkCorrupt(t, "Iterate", c, 0, err)
	if !strings.Contains(err.Error(), "(checksum mismatch, truncated value or missing value log file)") {
		t.Errorf("Iterate: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	ms, err := List(dir)
	if err != nil || len(ms) != 1 || ms[0].Damaged != "sample 0 is corrupt" {
		t.Fatalf("List = %+v, %v", ms, err)
	}
	if removed, _, err := Prune(dir, time.Hour, 3, time.Now()); err != nil || len(removed) != 1 {
		t.Fatalf("Prune = %+v, %v", removed, err)
	}
}
