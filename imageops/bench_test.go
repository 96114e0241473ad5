package imageops

import (
	"math/rand"
	"testing"

	"github.com/piperun/piperun/tensor"
)

// benchPhotos loads the shared photos and their total pixel count.
func benchPhotos(b *testing.B) ([][]byte, int64) {
	_, data := photos(b)
	var px int64
	for _, d := range data {
		cfg, err := DecodeConfig(d)
		if err != nil {
			b.Fatal(err)
		}
		px += int64(cfg.Height * cfg.Width)
	}
	return data, px
}

// report adds images/s and megapixels/s (of source pixels decoded).
func report(b *testing.B, images int, pixels int64) {
	s := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)*float64(images)/s, "images/s")
	b.ReportMetric(float64(b.N)*float64(pixels)/s/1e6, "MP/s")
	b.ReportMetric(0, "ns/op")
}

func benchDecode(b *testing.B, fn decodeFunc) {
	data, px := benchPhotos(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, d := range data {
			if _, err := fn(d, 3, DecodeOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	report(b, len(data), px)
}

// BenchmarkDecodeTurbo decodes every shared photo with the default backend
// (libjpeg-turbo in cgo builds).
func BenchmarkDecodeTurbo(b *testing.B) { benchDecode(b, Decode) }

// BenchmarkDecodePureGo decodes every shared photo with image/jpeg.
func BenchmarkDecodePureGo(b *testing.B) { benchDecode(b, DecodePureGo) }

// BenchmarkDecodeResize224 is the validation-style pipeline: decode, resize
// to 224×224 bilinear, to float.
func BenchmarkDecodeResize224(b *testing.B) {
	for _, bc := range []struct {
		name string
		hint Size
	}{{"full", Size{}}, {"dctscale", Size{224, 224}}} {
		b.Run(bc.name, func(b *testing.B) {
			data, px := benchPhotos(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, d := range data {
					img, err := DecodeResize(d, 3, 224, 224, Bilinear, DecodeOptions{ScaleHint: bc.hint})
					if err != nil {
						b.Fatal(err)
					}
					if _, err := ToFloat(img); err != nil {
						b.Fatal(err)
					}
				}
			}
			report(b, len(data), px)
		})
	}
}

// BenchmarkRandomResizedCrop is the training-style pipeline: pick the
// window from the header, decode, crop, resize to 224×224, flip, to float.
// "decodefull" decodes the whole image and crops it; "cropdecode" decodes
// only the window, and "cropdecode+dctscale" also lets large windows
// shrink in the DCT domain.
func BenchmarkRandomResizedCrop(b *testing.B) {
	for _, bc := range []string{"decodefull", "cropdecode", "cropdecode+dctscale"} {
		b.Run(bc, func(b *testing.B) {
			data, px := benchPhotos(b)
			rng := rand.New(rand.NewSource(1))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, d := range data {
					var img *tensor.Tensor
					var err error
					switch bc {
					case "decodefull":
						var full *tensor.Tensor
						full, err = Decode(d, 3, DecodeOptions{})
						if err == nil {
							img, err = RandomResizedCrop(full, 224, 224, 0, 0, rng)
						}
					case "cropdecode":
						img, err = DecodeRandomResizedCrop(d, 3, 224, 224, 0, 0, rng, DecodeOptions{})
					default:
						img, err = DecodeRandomResizedCrop(d, 3, 224, 224, 0, 0, rng, DecodeOptions{ScaleHint: Size{224, 224}})
					}
					if err != nil {
						b.Fatal(err)
					}
					img, _ = FlipLeftRight(img)
					if _, err := ToFloat(img); err != nil {
						b.Fatal(err)
					}
				}
			}
			report(b, len(data), px)
		})
	}
}

// BenchmarkResize resizes a decoded 500×375 photo to 224×224.
func BenchmarkResize(b *testing.B) {
	data, _ := benchPhotos(b)
	img, err := Decode(data[0], 3, DecodeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	f, _ := ToFloat(img)
	for _, bc := range []struct {
		name   string
		img    *tensor.Tensor
		method string
	}{{"uint8/bilinear", img, Bilinear}, {"uint8/bicubic", img, Bicubic}, {"uint8/area", img, Area}, {"uint8/nearest", img, Nearest}, {"float32/bilinear", f, Bilinear}} {
		b.Run(bc.name, func(b *testing.B) {
			px := int64(img.Shape[0] * img.Shape[1])
			for i := 0; i < b.N; i++ {
				if _, err := Resize(bc.img, 224, 224, bc.method); err != nil {
					b.Fatal(err)
				}
			}
			report(b, 1, px)
		})
	}
}
