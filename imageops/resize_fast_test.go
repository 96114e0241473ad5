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
