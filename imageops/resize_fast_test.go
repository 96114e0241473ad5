package imageops

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestVpass8FastMatches checks that the vertical pass the resize uses
// (C and vectorized in cgo builds) gives exactly vpass8's bytes, across
// shrinking and enlarging, every filter, odd row widths and one-row inputs.
func TestVpass8FastMatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ ih, oh, row int }{
		{375, 224, 224 * 3}, {224, 224, 5}, {1, 7, 3}, {7, 1, 33}, {100, 301, 17}, {64, 13, 8}, {2, 2, 1},
	} {
		for name, f := range filters {
			src := make([]byte, tc.ih*tc.row)
			for i := range src {
				src[i] = byte(rng.IntN(256))
			}
			cf := makeCoeffs(tc.ih, tc.oh, f, true)
			want := make([]byte, tc.oh*tc.row)
			got := make([]byte, tc.oh*tc.row)
			vpass8(src, tc.row, want, tc.oh, cf)
			vpass8Fast(src, tc.row, got, tc.oh, cf)
			if !bytes.Equal(got, want) {
				t.Errorf("%s %d→%d rows of %d: the fast vertical pass differs", name, tc.ih, tc.oh, tc.row)
			}
		}
	}
}

// BenchmarkVpass8 compares the Go vertical pass with the one the resize
// uses (C in cgo builds, the same Go loop otherwise), for a 375-row image
// of 224×3 bytes per row shrunk to 224 rows: the second half of a
// bilinear 500×375 → 224×224 resize.
func BenchmarkVpass8(b *testing.B) {
	const ih, oh, row = 375, 224, 224 * 3
	rng := rand.New(rand.NewPCG(3, 4))
	src := make([]byte, ih*row)
	for i := range src {
		src[i] = byte(rng.IntN(256))
	}
	cf := makeCoeffs(ih, oh, filters["bilinear"], true)
	dst := make([]byte, oh*row)
	for _, bc := range []struct {
		name string
		fn   func([]byte, int, []byte, int, *coeffs)
	}{{"go", vpass8}, {"used", vpass8Fast}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				bc.fn(src, row, dst, oh, cf)
			}
		})
	}
}
