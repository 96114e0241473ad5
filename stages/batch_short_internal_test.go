package stages

import (
	"context"
	"math"
	"slices"
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
			return stackConverted(ss, "image", lut, rows, nil)
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
			if got, want := out.Shape, []int{3, h, w, c}; !slices.Equal(got, want) {
				t.Fatalf("shape %v, want %v", got, want)
			}
			if n, want := out.Len(), 3*h*w*c; n != want || len(out.Data) != want*tc.dt.Size() {
				t.Fatalf("%d elements in %d bytes, want %d in %d", n, len(out.Data), want, want*tc.dt.Size())
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
			// Shared (a fan-out, a cache), it is never recycled, and the
			// whole buffer stays alive with it.
			out.Share()
			if got, want := sample.ValueSize(out), int64(fullBytes)+64; got != want {
				t.Errorf("budget charge once shared %d, want the whole buffer's %d", got, want)
			}
		})
	}
}

// TestBatchStageShortBatchBorrows: the batch stage itself passes its size
// to the stacking, so an epoch's last batch, shorter than the rest, goes
// into the buffer of a full one that the stage below gave back.
func TestBatchStageShortBatchBorrows(t *testing.T) {
	const h, w, c, size = 64, 64, 3, 4
	env := &Env{Release: func(*sample.Sample) {}, Hand: func(to, from *sample.Sample) {}, Shrink: func(*sample.Sample, int64) {}, TryReserve: func(int64) bool { return true }}
	b := &batchStage{env: env, cfg: &BatchConfig{Size: size}, pad: map[string]float64{}, deferred: map[string]*tensor.FloatLUT{}}
	var caps, rows []int
	emit := func(s *sample.Sample) error {
		out := s.Fields["image"].(*tensor.Tensor)
		caps, rows = append(caps, cap(out.Data)), append(rows, out.Shape[0])
		out.Recycle() // the stage below is done with it
		return nil
	}
	for i := range 7 {
		s := sample.New(int64(i), 0, "test")
		s.Fields["image"] = tensor.Alloc(tensor.Uint8, h, w, c)
		if err := b.Process(context.Background(), s, emit); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.EndEpoch(context.Background(), 0, emit); err != nil {
		t.Fatal(err)
	}
	full := size * h * w * c
	if len(rows) != 2 || rows[0] != size || rows[1] != 3 || caps[0] != full || caps[1] != full {
		t.Fatalf("batches of %v rows in buffers of %v bytes, want [4 3] rows both in a full batch's %d", rows, caps, full)
	}
}

// TestPadFits: a pad value the field's dtype would change is refused, in
// validate where the dtype is known and as the batch is made otherwise (a
// new-user test: -1 became 0 in uint8, 0.5 became 0 in int64 and 1e40 +Inf
// in float32, each looking like data).
func TestPadFits(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		dt   tensor.DType
		want string
	}{
		{0, tensor.Uint8, ""},
		{255, tensor.Uint8, ""},
		{-1, tensor.Uint8, "pad -1 does not fit uint8 (an integer in its range)"},
		{256, tensor.Uint8, "pad 256 does not fit uint8 (an integer in its range)"},
		{1.5, tensor.Uint8, "pad 1.5 does not fit uint8 (an integer in its range)"},
		{-1, tensor.Int32, ""},
		{1 << 31, tensor.Int32, "pad 2.147483648e+09 does not fit int32 (an integer in its range)"},
		{-1, tensor.Int64, ""},
		{1 << 53, tensor.Int64, ""},
		{0.5, tensor.Int64, "pad 0.5 does not fit int64 (an integer in its range)"},
		{1 << 63, tensor.Int64, "pad 9.223372036854776e+18 does not fit int64 (an integer in its range)"},
		{-1e39, tensor.Float32, "pad -1e+39 is beyond float32's range (±3.4028235e+38)"},
		{1e40, tensor.Float32, "pad 1e+40 is beyond float32's range (±3.4028235e+38)"},
		{math.Inf(-1), tensor.Float32, ""},
		{math.NaN(), tensor.Float32, ""},
		{0.1, tensor.Float32, ""},
		{1e300, tensor.Float64, ""},
	} {
		got := ""
		if err := padFits(tc.v, tc.dt); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("padFits(%v, %s) = %q, want %q", tc.v, tc.dt, got, tc.want)
		}
	}
	// Where validate did not know the dtype, the batch refuses the pad.
	ts := []*tensor.Tensor{tensor.New(tensor.Uint8, 2), tensor.New(tensor.Uint8, 3)}
	ss := []*sample.Sample{sample.New(0, 0, "a"), sample.New(1, 0, "b")}
	_, err := stackTensors("v", ts, true, -1, ss, 2)
	if want := `field "v" of a: pad -1 does not fit uint8 (an integer in its range)`; err == nil || err.Error() != want {
		t.Errorf("stacking with pad -1 into uint8: %v, want %s", err, want)
	}
}
