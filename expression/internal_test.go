package expression

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestReadPooled reads files of several sizes, including empty, into
// pooled buffers, reusing them, with the exact contents each time.
func TestReadPooled(t *testing.T) {
	dir := t.TempDir()
	for i, n := range []int{0, 1, 4095, 4096, 4097, 100_000, 1 << 20} {
		want := bytes.Repeat([]byte{byte(i + 1)}, n)
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, want, 0o644); err != nil {
			t.Fatal(err)
		}
		for rep := 0; rep < 2; rep++ {
			f, err := readPooled(p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(f.data, want) {
				t.Fatalf("size %d: read %d bytes that differ", n, len(f.data))
			}
			f.release()
			if f.data != nil {
				t.Fatal("release left the data in place")
			}
		}
	}
	// A file longer than Stat says (as /proc files, which report 0 bytes)
	// is read whole all the same.
	if want, err := os.ReadFile("/proc/self/cmdline"); err == nil && len(want) > 1 {
		f, err := readPooled("/proc/self/cmdline")
		if err != nil || !bytes.Equal(f.data, want) {
			t.Fatalf("/proc/self/cmdline: %v, %q, want %q", err, f.data, want)
		}
		f.release()
	}
	if _, err := readPooled(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Fatalf("missing file: %v", err)
	}
}
