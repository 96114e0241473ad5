package imageops

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzDecode feeds mutated images to both decoders, and to the paths
// that decode a window (a crop) and resize while decoding (libjpeg-turbo's
// row by row, in C, where a crash is no recoverable panic): they must
// return an image of the shape asked for or an error, never panic or hang,
// and never exceed MaxPixels.
func FuzzDecode(f *testing.F) {
	// Small real files as seeds; the fuzzer runs without them too.
	base := os.Getenv("PIPERUN_SHARED_DATA")
	if base == "" {
		base = filepath.Join("..", "..", "shared", "data")
	}
	for _, p := range []string{
		"jpeg-edge/go-image-testdata/video-001.q50.420.jpeg",
		"jpeg-edge/go-image-testdata/video-001.q50.444.progressive.jpeg",
		"jpeg-edge/go-image-testdata/video-001.q50.422.jpeg",
		"jpeg-edge/go-image-testdata/video-001.restart2.jpeg",
		"jpeg-edge/go-image-testdata/video-005.gray.jpeg",
		"jpeg-edge/go-image-testdata/video-001.rgb.jpeg",
		"jpeg-edge/libjpeg-turbo/testimgari.jpg",
		"png-edge/pngsuite/basn0g01.png",
		"png-edge/pngsuite/basn3p08-trns.png",
		"png-edge/pngsuite/basn6a16.png",
		"png-edge/gray-gradient.interlaced.png",
		"png-edge/invalid-trunc.png",
	} {
		if b, err := os.ReadFile(filepath.Join(base, p)); err == nil {
			f.Add(b, uint8(0))
		}
	}
	// A JPEG made here, so that the crop and fused paths have a seed to
	// start from without the shared data.
	img := image.NewRGBA(image.Rect(0, 0, 40, 30))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	var made bytes.Buffer
	if err := jpeg.Encode(&made, img, nil); err != nil {
		f.Fatal(err)
	}
	f.Add(made.Bytes(), uint8(2))   // 3 channels
	f.Add(made.Bytes(), uint8(8|2)) // and a scale hint
	f.Add([]byte{0xff, 0xd8, 0xff, 0xd9}, uint8(3))
	f.Add(pngMagic, uint8(1))
	const limit = 1 << 16
	f.Fuzz(func(t *testing.T, data []byte, ch uint8) {
		channels := []int{0, 1, 3, 4}[ch%4]
		opts := DecodeOptions{MaxPixels: limit, Lenient: ch&4 != 0}
		if ch&8 != 0 {
			opts.ScaleHint = Size{16, 16}
		}
		for i, fn := range []decodeFunc{Decode, DecodePureGo} {
			// The fuzzer has no limit per input, so a decoder that never
			// returns would only stall it: crash instead, which makes the
			// fuzzer keep the input.
			hung := time.AfterFunc(10*time.Second, func() {
				panic(fmt.Sprintf("decoder %d still running after 10s on a %d-byte input", i, len(data)))
			})
			img, err := fn(data, channels, opts)
			hung.Stop()
			if err != nil {
				if img != nil {
					t.Fatal("image returned with an error")
				}
				if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnsupported) &&
					!errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) {
					t.Fatalf("error %v wraps no sentinel", err)
				}
				continue
			}
			h, w, c := img.Shape[0], img.Shape[1], img.Shape[2]
			if int64(h)*int64(w) > limit || len(img.Data) != h*w*c || (channels != 0 && c != channels) {
				t.Fatalf("decoded %v (%d bytes) with limit %d, channels %d", img.Shape, len(img.Data), limit, channels)
			}
		}
		cfg, err := DecodeConfig(data)
		if err != nil || cfg.Height < 2 || cfg.Width < 2 || int64(cfg.Height)*int64(cfg.Width) > limit {
			return
		}
		crop := opts
		crop.Crop = &Rect{Y: cfg.Height / 4, X: cfg.Width / 4, H: max(1, cfg.Height/2), W: max(1, cfg.Width/2)}
		if img, err := Decode(data, channels, crop); err == nil && (img.Shape[0] > crop.Crop.H || img.Shape[1] > crop.Crop.W) {
			t.Fatalf("crop %+v of a %dx%d image decoded to %v", *crop.Crop, cfg.Width, cfg.Height, img.Shape)
		}
		for _, m := range []string{Bilinear, Area} {
			if img, err := DecodeResize(data, channels, 7, 9, m, opts); err == nil && (img.Shape[0] != 7 || img.Shape[1] != 9) {
				t.Fatalf("%s resize to 7x9 while decoding gave %v", m, img.Shape)
			}
		}
		if img, err := DecodeRandomResizedCrop(data, channels, 5, 6, 0, 0, &fixedRNG{v: []float64{0.5}}, opts); err == nil && (img.Shape[0] != 5 || img.Shape[1] != 6) {
			t.Fatalf("random resized crop to 5x6 while decoding gave %v", img.Shape)
		}
	})
}
