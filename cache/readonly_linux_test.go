package cache

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/piperun/piperun/internal/testutil"
)

// TestCompleteCacheOnReadOnlyMedium: a cache prepared once and mounted
// read-only (for every rank of a job) is read: the shared lock is taken
// without write access and the manifest's LastUsed is left as it was; an
// incomplete one there fails, naming the medium (found by a new-user
// test: it was refused). Needs a tmpfs it may mount, as root.
func TestCompleteCacheOnReadOnlyMedium(t *testing.T) {
	dir, readOnly := testutil.Tmpfs(t)
	c := openT(t, dir, "done", Options{})
	for id := int64(0); id < 50; id++ {
		if err := c.Put(id, testSample(id)); err != nil {
			t.Fatal(err)
		}
	}
	mustNil(t, c.MarkComplete())
	mustNil(t, c.Close())
	c = openT(t, dir, "part", Options{})
	mustNil(t, c.Put(0, testSample(0)))
	mustNil(t, c.Commit())
	mustNil(t, c.Close())
	before, err := os.ReadFile(filepath.Join(dir, "done", manifestName))
	mustNil(t, err)
	readOnly()

	c = openT(t, dir, "done", Options{})
	if !c.shared || !c.readOnly {
		t.Errorf("shared %v, read-only %v; want a shared read-only open", c.shared, c.readOnly)
	}
	checkContents(t, c, 50)
	mustNil(t, c.Close())
	after, err := os.ReadFile(filepath.Join(dir, "done", manifestName))
	mustNil(t, err)
	if string(after) != string(before) {
		t.Error("the manifest changed on a read-only medium")
	}
	if _, err := Open(dir, "part", testMeta, Options{}); err == nil || !readOnlyMedium(err) {
		t.Errorf("an incomplete cache on a read-only medium: %v, want a read-only file system error", err)
	}
}
