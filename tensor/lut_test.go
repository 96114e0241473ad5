package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestAffineLUTComputesTheTablesBits checks that Apply's computed path
// gives the very floats its tables hold, for to_float and for normalize
// with one and three channels, over every level and lengths whose tails
// do not fill a SIMD step, into buffers aligned for the streaming stores
// and not.
func TestAffineLUTComputesTheTablesBits(t *testing.T) {
	if !affineFast {
		t.Skip("no AVX2 and FMA (or no cgo) here: Apply looks up too, and would compare the tables with themselves")
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name     string
		sub, mul []float32
	}{
		{"to_float", []float32{0}, []float32{1}},
		{"imagenet normalize", []float32{0.485, 0.456, 0.406}, []float32{1 / float32(0.229), 1 / float32(0.224), 1 / float32(0.225)}},
		{"one mean", []float32{0.5}, []float32{1 / float32(0.25)}},
		{"random", []float32{r.Float32(), -r.Float32(), 3 * r.Float32()}, []float32{1 / r.Float32(), -7 * r.Float32(), 1e-3}},
	} {
		l := AffineLUT(tc.sub, tc.mul, tc.name)
		for _, n := range []int{0, 1, 2, 3, 23, 24, 25, 47, minComputed, minComputed + 1, minComputed + 23, 256 * 3, 224*224*3 + 5} {
			src := make([]byte, n+7) // Apply reads only len(dst) levels
			for i := range src {
				src[i] = byte(r.IntN(256))
			}
			for i := 0; i < min(n, 256*3); i++ {
				src[i] = byte(i / 3) // every level in every channel
			}
			want := make([]float32, n)
			l.lookUp(want, src)
			// From a 32-byte boundary (the streaming stores, for the longest
			// rows) and from one float past it (the plain ones).
			for _, off := range []int{0, 1} {
				buf := make([]float32, n+16)
				at := off
				for uintptr(unsafe.Pointer(&buf[at]))%32 != uintptr(4*off) {
					at++
				}
				got := buf[at : at+n]
				l.Apply(got, src)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s, n=%d, offset %d: element %d (level %d, channel %d) = %v (%08x), table says %v (%08x)",
							tc.name, n, off, i, src[i], i%len(tc.sub), got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					}
				}
			}
		}
	}
}

// TestAffineLUTTables checks the tables against the formula written out.
func TestAffineLUTTables(t *testing.T) {
	l := AffineLUT([]float32{0, 0.5, 1}, []float32{1, 2, 4}, "x")
	for _, tc := range []struct {
		c, v int
		want float32
	}{
		{0, 0, 0}, {0, 255, 1}, {0, 51, 0.2}, {1, 0, -1}, {1, 255, 1}, {2, 0, -4}, {2, 255, 0},
	} {
		if got := l.Tables[tc.c][tc.v]; got != tc.want {
			t.Errorf("table[%d][%d] = %v, want %v", tc.c, tc.v, got, tc.want)
		}
	}
}

// BenchmarkFloatLUT converts a batch of 32 224×224×3 images into a reused
// float32 buffer, as the batch stage does for a fused to_float (normalize):
// "tables" looks each level up, "computed" is what Apply runs.
func BenchmarkFloatLUT(b *testing.B) {
	const row = 224 * 224 * 3
	src := make([]byte, row)
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]float32, 32*row)
	for _, l := range []*FloatLUT{
		AffineLUT([]float32{0}, []float32{1}, "to_float"),
		AffineLUT([]float32{0.485, 0.456, 0.406}, []float32{4.37, 4.46, 4.44}, "normalize"),
	} {
		for _, how := range []string{"tables", "computed"} {
			b.Run(l.Op+"/"+how, func(b *testing.B) {
				for b.Loop() {
					for r := range 32 {
						d := dst[r*row : (r+1)*row]
						if how == "tables" {
							l.lookUp(d, src)
						} else {
							l.Apply(d, src)
						}
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(32*b.N), "µs/image")
			})
		}
	}
}
