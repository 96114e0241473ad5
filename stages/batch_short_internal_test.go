package stages

import (
	"testing"
	"unsafe"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/tensor"
)

// TestShortBatchBorrowsAFullBuffer: the last, short batch of an epoch is
// stacked into the idle buffer of a full one, with the same values as a
// buffer of its own, and charged for the whole buffer it holds.
func TestShortBatchBorrowsAFullBuffer(t *testing.T) {
	const h, w, c, rows = 64, 64, 3, 4
	images := func(n int) []*sample.Sample {
		ss := make([]*sample.Sample, n)
		for i := range ss {
			img := tensor.New(tensor.Uint8, h, w, c)
			for j := range img.Data {
				img.Data[j] = byte(i*7 + j)
			}
			ss[i] = sample.New(int64(i), 0, "test")
			ss[i].Fields["image"] = img
		}
		return ss
	}
	addr := func(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
	lut := tensor.AffineLUT([]float32{0}, []float32{1}, "to_float")
	for _, tc := range []struct {
		name  string
		dt    tensor.DType
		stack func(ss []*sample.Sample) (*tensor.Tensor, error)
		want  func(i, j int) float64 // element j of row i
	}{
		{"to_float at the batch", tensor.Float32, func(ss []*sample.Sample) (*tensor.Tensor, error) {
			return stackConverted(ss, "image", lut, rows)
		}, func(i, j int) float64 { return float64(float32(byte(i*7+j)) / 255) }},
		{"uint8", tensor.Uint8, func(ss []*sample.Sample) (*tensor.Tensor, error) {
			v, err := stack(ss, "image", nil, rows)
			if err != nil {
				return nil, err
			}
			return v.(*tensor.Tensor), nil
		}, func(i, j int) float64 { return float64(byte(i*7 + j)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			full := tensor.Alloc(tc.dt, rows, h, w, c)
			fullAddr, fullBytes := addr(full.Data), len(full.Data)
			full.Recycle()
			out, err := tc.stack(images(3))
			if err != nil {
				t.Fatal(err)
			}
			defer out.Recycle()
			if addr(out.Data) != fullAddr || cap(out.Data) != fullBytes {
				t.Errorf("short batch: cap %d, in the idle full buffer: %v; want it there, cap %d", cap(out.Data), addr(out.Data) == fullAddr, fullBytes)
			}
			if got, want := out.Shape, []int{3, h, w, c}; len(got) != 4 || got[0] != want[0] || got[1] != h || got[2] != w || got[3] != c {
				t.Fatalf("shape %v, want %v", got, want)
			}
			if n := out.Len(); n != 3*h*w*c || len(out.Data) != 3*h*w*c*tc.dt.Size() {
				t.Fatalf("%d elements in %d bytes, want %d", n, len(out.Data), 3*h*w*c)
			}
			for i := 0; i < 3; i++ {
				for j := 0; j < h*w*c; j++ {
					if got, want := out.At(i*h*w*c+j), tc.want(i, j); got != want {
						t.Fatalf("row %d element %d = %v, want %v", i, j, got, want)
					}
				}
			}
			if got, want := sample.ValueSize(out), int64(fullBytes)+64; got != want {
				t.Errorf("budget charge %d, want the whole buffer's %d", got, want)
			}
		})
	}
}
