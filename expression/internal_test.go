package expression

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/piperun/piperun/tensor"
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

// FuzzDecodeRaw: any bytes and any shape give a tensor holding exactly
// those bytes in a shape whose product is their element count, or an
// error; never a panic or a tensor of another size.
func FuzzDecodeRaw(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6}, uint8(0), uint8(3), -1, 3, 0)
	f.Add([]byte{1, 2, 3, 4}, uint8(3), uint8(3), 1, 1, 1)
	f.Add([]byte{}, uint8(0), uint8(3), 0, -1, 2)
	f.Add([]byte{0, 0, 0x80, 0x3f}, uint8(3), uint8(3), 1000000000, 1000000000, -1)
	f.Add([]byte{7}, uint8(0), uint8(0), 0, 0, 0)
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8}, uint8(2), uint8(1), -1, 0, 0)
	dtypes := []tensor.DType{tensor.Uint8, tensor.Int32, tensor.Int64, tensor.Float32, tensor.Float64}
	f.Fuzz(func(t *testing.T, data []byte, k, rank uint8, a, b, c int) {
		dt := dtypes[int(k)%len(dtypes)]
		shape := []int{a, b, c}[:rank%4]
		if checkRawShape(shape) != nil {
			return
		}
		x, err := decodeRaw(data, dt, shape)
		if err != nil {
			return
		}
		if x.DType != dt || !bytes.Equal(x.Data, data) || tensor.NumElements(x.Shape)*dt.Size() != len(data) {
			t.Fatalf("%d bytes as %s %v: got %s %v with %d bytes", len(data), dt, shape, x.DType, x.Shape, len(x.Data))
		}
	})
}
