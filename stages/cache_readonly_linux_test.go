package stages_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/piperun/piperun/cache"
	"github.com/piperun/piperun/internal/testutil"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// TestCacheDirReadOnlyWithCompleteCache: validate lets a cache directory
// on a read-only medium pass with a warning when it holds a complete
// cache (a run whose upstream matches reads it), and refuses one that
// holds none. Needs a tmpfs it may mount, as root.
func TestCacheDirReadOnlyWithCompleteCache(t *testing.T) {
	dir, readOnly := testutil.Tmpfs(t)
	c, err := cache.Open(filepath.Join(dir, "full"), "0123456789abcdef", cache.Manifest{}, cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Put(0, &sample.Sample{Fields: map[string]any{"index": int64(0)}}); err != nil {
		t.Fatal(err)
	}
	if err := c.MarkComplete(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	readOnly()
	for _, tc := range []struct{ sub, want string }{
		{"full", "warning: stages[1].dir: cache directory " + filepath.Join(dir, "full") + " is not writable: read-only file system: only a complete cache there can be read (it holds 1); a run whose upstream matches none of them fails"},
		{"empty", "stages[1].dir: cache directory " + filepath.Join(dir, "empty") + " cannot be made in " + dir + ": read-only file system"},
	} {
		src := "version: 1\nname: c\nseed: 1\nstages:\n  - {name: r, type: range, count: 1}\n  - {name: c, type: cache, dir: " + filepath.Join(dir, tc.sub) + "}\n  - {name: out, type: discard}\n"
		_, diags := spec.Parse(filepath.Join(t.TempDir(), "c.yaml"), []byte(src), spec.Options{Catalog: stages.Default(), Environment: true})
		if len(diags) != 1 || !strings.HasSuffix(diags[0].String(), tc.want) {
			t.Errorf("%s: got %v\nwant one ending %q", tc.sub, diags, tc.want)
		}
	}
}
