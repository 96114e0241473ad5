package imageops

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// synthJPEG encodes a w×h image of noise and gradients, gray or RGB.
func synthJPEG(t *testing.T, w, h int, gray bool) []byte {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(w), uint64(h)))
	var img image.Image
	if gray {
		g := image.NewGray(image.Rect(0, 0, w, h))
		for i := range g.Pix {
			g.Pix[i] = uint8(i%251) ^ uint8(r.IntN(32))
		}
		img = g
	} else {
		c := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				c.Set(x, y, color.RGBA{uint8(x * 255 / w), uint8(y * 255 / h), uint8(r.IntN(256)), 255})
			}
		}
		img = c
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// errClass names the sentinel error err wraps, for comparing two paths.
func errClass(err error) string {
	for _, e := range []error{ErrFormat, ErrTooLarge, ErrUnsupported, ErrCorrupt, ErrTruncated, ErrArgument} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return fmt.Sprintf("other (%v)", err)
}

// TestDecodeResizeStreamsTheHorizontalPass: the fused decode + resize,
// which runs the horizontal pass on each group of rows as libjpeg-turbo
// delivers them, gives byte for byte what resizing the whole decoded frame
// gives, and the same kind of error where that fails: over the shared
// photos and edge-case JPEGs (progressive, restart intervals, odd
// sampling, corrupt ones) and synthetic ones (1 pixel high or wide, gray),
// at shrinking and enlarging targets; bicubic, whose weights have negative
// taps, keeps the frame.
func TestDecodeResizeStreamsTheHorizontalPass(t *testing.T) {
	if hpassJPEG == nil {
		t.Skip("this build decodes JPEGs with image/jpeg, which has no row-by-row pass")
	}
	type file struct {
		name string
		data []byte
	}
	var files []file
	names, data := photos(t)
	for i := range names {
		if i%4 == 0 { // every photo's size class is in a quarter of them
			files = append(files, file{"photos/imagenet/" + names[i], data[i]})
		}
	}
	edge := sharedData(t, "jpeg-edge")
	_ = filepath.WalkDir(edge, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".jpg") || strings.HasSuffix(p, ".jpeg") || strings.HasSuffix(p, ".JPEG")) {
			files = append(files, file{strings.TrimPrefix(p, edge+"/"), readFile(t, p)})
		}
		return nil
	})
	for _, s := range []struct {
		w, h int
		gray bool
	}{{1, 1, false}, {17, 1, false}, {1, 40, false}, {1000, 37, false}, {37, 1000, false}, {640, 480, true}} {
		files = append(files, file{fmt.Sprintf("synthetic %dx%d gray=%v", s.w, s.h, s.gray), synthJPEG(t, s.w, s.h, s.gray)})
	}

	streamed := 0
	saved := fusedBackend
	defer func() { fusedBackend = saved }()
	fusedBackend.hpass = func(data []byte, info *jpegInfo, num, ow int, cf *coeffs, alloc func(int) []byte, lenient bool) ([]byte, int, error) {
		streamed++
		return hpassJPEG(data, info, num, ow, cf, alloc, lenient)
	}
	frameOnly := backend{defaultJPEG, windowJPEG, nil}
	compared := 0
	for _, f := range files {
		for _, tc := range []struct {
			h, w   int
			method string
			hint   bool
		}{
			{224, 224, Bilinear, true},
			{224, 224, Bilinear, false},
			{64, 48, Area, true},
			{300, 500, Bilinear, false}, // enlarges most of them
			{224, 224, Bicubic, true},
		} {
			for _, lenient := range []bool{false, true} {
				opts := DecodeOptions{Lenient: lenient}
				if tc.hint {
					opts.ScaleHint = ScaleHintFor(tc.h, tc.w, tc.method)
				}
				what := fmt.Sprintf("%s to %dx%d %s (hint %v, lenient %v)", f.name, tc.h, tc.w, tc.method, tc.hint, lenient)
				got, gerr := DecodeResize(f.data, 3, tc.h, tc.w, tc.method, opts)
				frame, ferr := decode(f.data, 3, &opts, frameOnly, defaultPool.Get)
				if ferr != nil {
					if gerr == nil || errClass(gerr) != errClass(ferr) {
						t.Errorf("%s: fused error %v, want one like the frame's: %v", what, gerr, ferr)
					}
					continue
				}
				want, err := resize(frame, tc.h, tc.w, tc.method, nil)
				defaultPool.Put(frame.Data)
				if err != nil {
					t.Fatalf("%s: resize: %v", what, err)
				}
				if gerr != nil {
					t.Errorf("%s: fused error %v, the frame decoded", what, gerr)
					continue
				}
				if fmt.Sprint(got.Shape) != fmt.Sprint(want.Shape) || !bytes.Equal(got.Data, want.Data) {
					t.Errorf("%s: fused result %v differs from the frame's resized %v", what, got.Shape, want.Shape)
				}
				compared++
				got.Recycle()
				want.Recycle()
			}
		}
	}
	// Most cases take the row-by-row path: not bicubic, not the targets a
	// photo already has, not CMYK or rotated files.
	if streamed < compared/2 {
		t.Errorf("the row-by-row pass ran %d times in %d comparisons, want most", streamed, compared)
	}
	t.Logf("%d files, %d results compared, %d decoded row by row", len(files), compared, streamed)
}
