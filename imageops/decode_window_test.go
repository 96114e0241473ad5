package imageops

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestWindowDecodeIntoGuardedOutput decodes windows of the shared photos
// straight into an output that ends at a guard page and compares each with
// the same window cut from a full decode: one and three channels, at full
// size and scaled by 3/8, for windows of one row or column, tiny ones
// (whose scanlines never fit their own slot, so every row goes through the
// row buffer), ones at the right and bottom edges and random ones. The
// window decoder writes each scanline, wider than the window, into the
// output before moving it into place; a write past the output faults here
// instead of landing in an allocator's slack (found in review).
func TestWindowDecodeIntoGuardedOutput(t *testing.T) {
	if windowJPEG == nil {
		t.Skip("no window decoder in this build: Decode crops a full decode")
	}
	names, photos := photos(t)
	rng := rand.New(rand.NewPCG(3, 4))
	windows := 0
	for i := 0; i < len(photos); i += 5 {
		data := photos[i]
		info, err := scanJPEG(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range []int{1, 3} {
			for _, num := range []int{8, 3} {
				full, sh, sw, err := defaultJPEG(data, &info, ch, num, makeBytes, false)
				if err != nil {
					t.Fatal(err)
				}
				wins := []Rect{{0, 0, sh, sw}, {sh - 1, sw - 1, 1, 1}, {0, 0, 1, sw}, {sh - 1, 0, 1, sw}, {0, sw - 1, sh, 1}}
				for k := range 12 {
					var r Rect
					switch k % 3 {
					case 0: // tiny
						r.H, r.W = 1+rng.IntN(min(sh, 6)), 1+rng.IntN(min(sw, 20))
						r.X = rng.IntN(sw - r.W + 1)
					case 1: // at the right edge
						r.H, r.W = 1+rng.IntN(sh), 1+rng.IntN(sw)
						r.X = sw - r.W
					default:
						r.H, r.W = 1+rng.IntN(sh), 1+rng.IntN(sw)
						r.X = rng.IntN(sw - r.W + 1)
					}
					r.Y = rng.IntN(sh - r.H + 1)
					wins = append(wins, r)
				}
				for _, r := range wins {
					got, err := windowJPEG(data, &info, ch, num, r, func(n int) []byte { return endGuarded(t, n) }, false)
					if err != nil {
						t.Fatalf("%s, %d channels, scale %d/8, window %+v: %v", names[i], ch, num, r, err)
					}
					want := make([]byte, 0, r.H*r.W*ch)
					for y := r.Y; y < r.Y+r.H; y++ {
						want = append(want, full[(y*sw+r.X)*ch:(y*sw+r.X+r.W)*ch]...)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("%s, %d channels, scale %d/8 (%dx%d): window %+v differs from the full decode's", names[i], ch, num, sw, sh, r)
					}
					windows++
				}
			}
		}
	}
	t.Logf("%d windows of %d photos", windows, (len(photos)+4)/5)
}
