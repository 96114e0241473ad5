package imageops

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
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
// instead of landing in an allocator's slack.
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

// TestWindowDecodeRefusesDamageAnywhere decodes every file of the JPEG edge
// corpus whole and through crop windows (the top-left corner, one row at
// the top, and random ones, at full size and with a scale hint): a file
// the whole decode refuses is refused through every window, and one it
// accepts is accepted through every window. The window decoder skips the
// rows below the window; before it entropy-decoded them, a
// random_resized_crop kept a damaged file (corrupted-crlf/ducky_out5.jpg,
// damaged low in the frame) that resize skipped, depending on the crop a
// seed drew (found by a tester).
func TestWindowDecodeRefusesDamageAnywhere(t *testing.T) {
	dir := sharedData(t, "jpeg-edge")
	rng := rand.New(rand.NewPCG(5, 6))
	refused := 0
	for _, row := range readManifest(t, dir) {
		name := row["file"]
		if row["format"] != "jpeg" {
			continue
		}
		data := readFile(t, filepath.Join(dir, name))
		_, wholeErr := Decode(data, 3, DecodeOptions{})
		cfg, err := DecodeConfig(data)
		if err != nil {
			if wholeErr == nil {
				t.Errorf("%s: header refused (%v) but the whole decode succeeded", name, err)
			}
			continue
		}
		h, w := cfg.Height, cfg.Width
		wins := []Rect{{0, 0, min(h, 8), min(w, 8)}, {0, 0, 1, w}}
		for range 6 {
			r := Rect{H: 1 + rng.IntN(h), W: 1 + rng.IntN(w)}
			r.Y, r.X = rng.IntN(h-r.H+1), rng.IntN(w-r.W+1)
			wins = append(wins, r)
		}
		for _, r := range wins {
			for _, hint := range []Size{{}, {H: 16, W: 16}} {
				_, err := Decode(data, 3, DecodeOptions{Crop: &r, ScaleHint: hint})
				switch {
				case wholeErr != nil && err == nil:
					t.Errorf("%s: whole decode refused (%v), window %+v (hint %v) accepted", name, wholeErr, r, hint)
				case wholeErr == nil && err != nil:
					t.Errorf("%s: whole decode accepted, window %+v (hint %v) refused: %v", name, r, hint, err)
				}
			}
		}
		if wholeErr != nil {
			refused++
		}
	}
	// corrupted-crlf's two files have sound headers and damaged data.
	if refused < 2 {
		t.Fatalf("only %d files with a sound header refused in the edge corpus; the test needs the corrupted ones", refused)
	}
	t.Logf("%d refused files, each refused through every window", refused)
}

// TestThinWindowsMatchFullDecode decodes windows one and two columns wide
// at every column of the first 40, and at the last, of the Go test images
// (4:2:0, 4:2:2, 4:4:4, progressive, restart markers, grayscale) at full
// size and scaled by 1/2 and 3/8, and compares each with the same window
// cut from a full decode. libjpeg-turbo upsamples a colour plane 2 columns
// wide or less without its fancy filter, so a narrow crop must be widened
// before it reaches libjpeg (a 1-column window at x 0 of
// the 4:2:0 file differed by up to 2 levels).
func TestThinWindowsMatchFullDecode(t *testing.T) {
	if windowJPEG == nil {
		t.Skip("no window decoder in this build: Decode crops a full decode")
	}
	dir := sharedData(t, "jpeg-edge/go-image-testdata")
	windows := 0
	for _, name := range []string{"video-001.jpeg", "video-001.q50.420.jpeg", "video-001.q50.422.jpeg", "video-001.q50.444.progressive.jpeg", "video-001.restart2.jpeg", "video-001.progressive.jpeg", "video-005.gray.jpeg"} {
		data := readFile(t, filepath.Join(dir, name))
		info, err := scanJPEG(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, num := range []int{8, 4, 3} {
			full, sh, sw, err := defaultJPEG(data, &info, 3, num, makeBytes, false)
			if err != nil {
				t.Fatal(err)
			}
			for x := 0; x < sw; x++ {
				if x == 40 {
					x = sw - 2
				}
				for w := 1; w <= 2 && x+w <= sw; w++ {
					r := Rect{Y: sh / 3, X: x, H: sh / 2, W: w}
					got, err := windowJPEG(data, &info, 3, num, r, makeBytes, false)
					if err != nil {
						t.Fatalf("%s, scale %d/8, window %+v: %v", name, num, r, err)
					}
					for y := range r.H {
						want := full[((r.Y+y)*sw+r.X)*3 : ((r.Y+y)*sw+r.X+r.W)*3]
						if row := got[y*r.W*3 : (y+1)*r.W*3]; !bytes.Equal(row, want) {
							t.Fatalf("%s, scale %d/8 (%dx%d), window %+v, row %d: %v, the full decode has %v", name, num, sw, sh, r, y, row, want)
						}
					}
					windows++
				}
			}
		}
	}
	t.Logf("%d windows", windows)
}
