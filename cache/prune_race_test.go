//go:build unix

package cache

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPruneRacingOpen: a prune and a run opening the same cache at once
// never leave the run a half-deleted store. Deleting the folder in place
// under its lock removed the lock file first, and a run starting then
// locked a fresh one and opened the store while its tables went: it
// recorded the cache damaged, or failed on the lock file, and the prune
// failed with "directory not empty" (a new-user test, 2 and 1 of 95 and
// about 15 % of tries). Now the folder is renamed aside under its lock.
func TestPruneRacingOpen(t *testing.T) {
	dir := t.TempDir()
	now := time.Now().Add(24 * time.Hour) // every cache older than 0
	for try := range 20 {
		c := openT(t, dir, "fp", Options{})
		for id := range int64(40) {
			if err := c.Put(id, testSample(id)); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.MarkComplete(); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var pruneErr, openErr error
		var got *Cache
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, _, pruneErr = Prune(dir, 0, 0, now)
		}()
		go func() {
			defer wg.Done()
			got, openErr = Open(dir, "fp", testMeta, Options{})
		}()
		wg.Wait()
		if pruneErr != nil {
			t.Fatalf("try %d: prune: %v", try, pruneErr)
		}
		var de *DamagedError
		switch {
		case errors.As(openErr, &de):
			t.Fatalf("try %d: open found the cache damaged: %v", try, openErr)
		case openErr != nil && !strings.Contains(openErr.Error(), "in use"):
			t.Fatalf("try %d: open: %v", try, openErr)
		case openErr == nil:
			// Either the whole cache, before the prune, or a fresh one.
			if n := got.Manifest().Samples; got.Manifest().Complete && n != 40 || !got.Manifest().Complete && n != 0 {
				t.Fatalf("try %d: opened a cache of %d samples, complete %v", try, n, got.Manifest().Complete)
			}
			if err := got.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if err := Remove(dir, "fp"); err != nil {
			t.Fatal(err)
		}
	}
	// The moment the deletion starts: a run opening the cache then gets a
	// fresh one, and the prune leaves that alone.
	c := openT(t, dir, "fp", Options{})
	if err := c.Put(0, testSample(0)); err != nil {
		t.Fatal(err)
	}
	if err := c.MarkComplete(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	removing = func(path string) {
		if path == filepath.Join(dir, "fp") {
			t.Errorf("the cache is deleted in place")
		}
		fresh, err := Open(dir, "fp", testMeta, Options{})
		if err != nil {
			t.Errorf("open while the prune deletes: %v", err)
			return
		}
		if m := fresh.Manifest(); m.Complete || m.Samples != 0 {
			t.Errorf("open while the prune deletes: complete %v, %d samples; want a fresh cache", m.Complete, m.Samples)
		}
		fresh.Close()
	}
	removed, _, err := Prune(dir, 0, 0, now)
	removing = nil
	if err != nil || len(removed) != 1 {
		t.Fatalf("prune: %v, %v", removed, err)
	}
	if ms, err := List(dir); err != nil || len(ms) != 1 || ms[0].Complete {
		t.Errorf("after the prune: %+v, %v; want the fresh cache the run opened", ms, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".pruning-*"))
	if len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
	// What a pruner that died left aside goes with the next prune.
	if err := os.MkdirAll(filepath.Join(dir, pruningPrefix+"x-1", "badger"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Prune(dir, 0, 0, now); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, pruningPrefix+"x-1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a leftover of a dead pruner is still there: %v", err)
	}
}
