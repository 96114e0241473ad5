package tfrecord

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestOpenBytesCoverAReader opens 64 readers of each compression on a real
// file, reads a record from each, and measures the heap they hold: the
// figure an interleave counts for each open file must cover it, and not
// be so far above it that budgets are wasted.
func TestOpenBytesCoverAReader(t *testing.T) {
	const n = 64
	for _, c := range []Compression{None, Gzip, Zlib} {
		path := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(path, writeAll(t, c, benchRecords(4)), 0o644); err != nil {
			t.Fatal(err)
		}
		readers := make([]*Reader, 0, n)
		files := make([]io.Closer, 0, n)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range n {
			r, f, err := Open(path, c, true)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Next(); err != nil {
				t.Fatal(err)
			}
			readers, files = append(readers, r), append(files, f)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		each := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
		if want := OpenBytes(c); each > want || each < want*3/4 {
			t.Errorf("%s: a reader holds %d bytes, OpenBytes says %d", c, each, want)
		}
		runtime.KeepAlive(readers)
		for _, f := range files {
			f.Close()
		}
	}
}
