// Package bench holds piperun's end-to-end benchmark specs and scripts
// (see RESULTS.md). This file is the single-core reference rate the W1
// figures are compared with: libjpeg-turbo decode + 224×224 bilinear
// resize of the shared photos, without to_float.
package bench

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"testing"

	"github.com/piperun/piperun/imageops"
)

// photos reads every JPEG in $PHOTOS (default: the shared ImageNet sample,
// ../../shared/data/photos/imagenet from this directory); it skips when absent.
func photos(b *testing.B) ([][]byte, int64) {
	dir := os.Getenv("PHOTOS")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "data", "photos", "imagenet")
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*.JPEG"))
	if len(names) == 0 {
		b.Skipf("no *.JPEG in %s (set PHOTOS)", dir)
	}
	sort.Strings(names)
	var data [][]byte
	var px int64
	for _, n := range names {
		d, err := os.ReadFile(n)
		if err != nil {
			b.Fatal(err)
		}
		cfg, err := imageops.DecodeConfig(d)
		if err != nil {
			b.Fatalf("%s: %v", n, err)
		}
		px += int64(cfg.Height * cfg.Width)
		data = append(data, d)
	}
	return data, px
}

// BenchmarkDecodeResize224NoFloat decodes and resizes every photo to
// 224×224 bilinear (uint8 out), recycling the results as a pipeline does.
// "dctscale" lets libjpeg-turbo shrink in the DCT domain down to the
// target, the fastest decode+resize there is; "dct2x" stops at twice the
// target, which is what piperun's fused `decode_image(...) | resize(224,
// 224)` did until it kept 4× (imageops.ScaleHintFor: for these photos,
// under 900 pixels a side, 4× means no DCT scaling, as 2× did for all but
// a few); "full" decodes at full size first, as the unfused spec does.
// "+float" adds to_float.
func BenchmarkDecodeResize224NoFloat(b *testing.B) {
	for _, bc := range []struct {
		name  string
		hint  imageops.Size
		float bool
	}{
		{"dctscale", imageops.Size{H: 224, W: 224}, false},
		{"dct2x", imageops.Size{H: 2 * 224, W: 2 * 224}, false},
		{"full", imageops.Size{}, false},
		{"dctscale+float", imageops.Size{H: 224, W: 224}, true},
		{"full+float", imageops.Size{}, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			data, px := photos(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, d := range data {
					img, err := imageops.DecodeResize(d, 3, 224, 224, imageops.Bilinear, imageops.DecodeOptions{ScaleHint: bc.hint})
					if err != nil {
						b.Fatal(err)
					}
					if bc.float {
						f, err := imageops.ToFloat(img)
						if err != nil {
							b.Fatal(err)
						}
						f.Recycle()
					}
					img.Recycle()
					// Yield as piperun's workers do (engine.yieldEvery):
					// without it Go's monitor keeps taking this loop's P
					// while it is in C, and the loop ran 1–2 % slower in
					// the median of 10 interleaved pairs, up to 10 % in
					// some, which would flatter every ratio against it.
					runtime.Gosched()
				}
			}
			s := b.Elapsed().Seconds()
			b.ReportMetric(float64(b.N)*float64(len(data))/s, "images/s")
			b.ReportMetric(float64(b.N)*float64(px)/s/1e6, "MP/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
