package imageops

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/piperun/piperun/tensor"
)

// synthetic is the HWC image testdata/color_golden.py makes: level i is
// (i*37 + 11) % 256, and a float32 image divides it by 255.
func synthetic(dt tensor.DType, h, w, c int) *tensor.Tensor {
	t := tensor.New(dt, h, w, c)
	for i := 0; i < h*w*c; i++ {
		lv := uint8((i*37 + 11) % 256)
		if dt == tensor.Uint8 {
			t.Data[i] = lv
		} else {
			t.Float32()[i] = float32(lv) / 255
		}
	}
	return t
}

// TestColorMatchesTorchvision checks the colour and geometry functions
// against torchvision 0.14's (numpy's rot90) on the images
// testdata/color_golden.py describes: uint8 levels exactly, float32 within
// 1e-6.
func TestColorMatchesTorchvision(t *testing.T) {
	raw, err := os.ReadFile("testdata/color_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Height, Width int
		Cases         []struct {
			Op       string
			DType    string
			Channels int
			Arg      float64
			Shape    []int
			Out      []float64
		}
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	if len(golden.Cases) < 60 {
		t.Fatalf("%d cases in the golden file", len(golden.Cases))
	}
	for _, tc := range golden.Cases {
		name := fmt.Sprintf("%s(%v)/%s/%dch", tc.Op, tc.Arg, tc.DType, tc.Channels)
		dt := tensor.Uint8
		if tc.DType == "float32" {
			dt = tensor.Float32
		}
		in := synthetic(dt, golden.Height, golden.Width, tc.Channels)
		before := append([]byte(nil), in.Data...)
		var got *tensor.Tensor
		switch tc.Op {
		case "adjust_brightness":
			got, err = AdjustBrightness(in, tc.Arg)
		case "adjust_contrast":
			got, err = AdjustContrast(in, tc.Arg)
		case "adjust_saturation":
			got, err = AdjustSaturation(in, tc.Arg)
		case "grayscale":
			got, err = Grayscale(in, int(tc.Arg))
		case "flip_up_down":
			got, err = FlipUpDown(in)
		case "rot90":
			got, err = Rot90(in, int(tc.Arg))
		default:
			t.Fatalf("%s: unknown op", name)
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if string(in.Data) != string(before) {
			t.Errorf("%s: changed its input", name)
		}
		if fmt.Sprint(got.Shape) != fmt.Sprint(tc.Shape) || got.DType != dt {
			t.Errorf("%s: %s %v, want %s %v", name, got.DType, got.Shape, dt, tc.Shape)
			continue
		}
		bad, worst := 0, 0.0
		for i, want := range tc.Out {
			var v float64
			if dt == tensor.Uint8 {
				v = float64(got.Data[i])
			} else {
				v = float64(got.Float32()[i])
			}
			d := math.Abs(v - want)
			if (dt == tensor.Uint8 && d != 0) || d > 1e-6 {
				bad++
			}
			worst = max(worst, d)
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d values differ from torchvision's, by up to %v", name, bad, len(tc.Out), worst)
		}
	}
}

// TestColorJitterDrawsOrderThenFactors: the order is a Fisher–Yates
// shuffle of brightness, contrast, saturation from the first two draws,
// and the three factors come next, each uniform in [max(0, 1-v), 1+v];
// the result is the adjustments applied one after another in that order.
// An amount of 0 skips its adjustment but still takes its draws.
func TestColorJitterDrawsOrderThenFactors(t *testing.T) {
	img := synthetic(tensor.Uint8, 5, 7, 3)
	// Draws 0.9 then 0.1: i=2 swaps with j=int(0.9*3)=2 (stays), i=1
	// with j=int(0.1*2)=0, so the order is [1, 0, 2]: contrast,
	// brightness, saturation. Factors: brightness 0.4 → 0.6+0.8*0.25,
	// contrast 0.5 → 0.5+1.0*0.8, saturation 1.5 → 0+2.5*0.75.
	seq := []float64{0.9, 0.1, 0.25, 0.8, 0.75}
	got, err := ColorJitter(img, JitterAmount(0.4), JitterAmount(0.5), JitterAmount(1.5), &fixedRNG{v: seq})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := AdjustContrast(img, 0.5+1.0*0.8)
	want, _ = AdjustBrightness(want, 0.6+0.8*0.25)
	want, _ = AdjustSaturation(want, 2.5*0.75)
	if string(got.Data) != string(want.Data) {
		t.Error("color_jitter is not contrast, brightness, saturation with the drawn factors")
	}
	// The same draws in another order give another image.
	other, _ := AdjustBrightness(img, 0.6+0.8*0.25)
	other, _ = AdjustContrast(other, 0.5+1.0*0.8)
	other, _ = AdjustSaturation(other, 2.5*0.75)
	if string(got.Data) == string(other.Data) {
		t.Error("the order of the adjustments made no difference; the test proves nothing")
	}
	// Contrast off: brightness then saturation with the same factors.
	got, err = ColorJitter(img, JitterAmount(0.4), JitterAmount(0), JitterAmount(1.5), &fixedRNG{v: seq})
	if err != nil {
		t.Fatal(err)
	}
	want, _ = AdjustBrightness(img, 0.6+0.8*0.25)
	want, _ = AdjustSaturation(want, 2.5*0.75)
	if string(got.Data) != string(want.Data) {
		t.Error("with contrast 0, color_jitter is not brightness then saturation with the same draws")
	}
	// Ranges as torchvision's (min, max): the factor is lo + (hi-lo)*draw.
	got, err = ColorJitter(img, Jitter{Lo: 0.5, Hi: 1.5}, JitterAmount(0), Jitter{Lo: 2, Hi: 2}, &fixedRNG{v: seq})
	if err != nil {
		t.Fatal(err)
	}
	want, _ = AdjustBrightness(img, 0.5+1.0*0.25)
	want, _ = AdjustSaturation(want, 2)
	if string(got.Data) != string(want.Data) {
		t.Error("with ranges, color_jitter is not brightness 0.75 then saturation 2")
	}
	if _, err := ColorJitter(img, Jitter{Lo: 1.5, Hi: 0.5}, JitterAmount(0), JitterAmount(0), &fixedRNG{v: seq}); err == nil ||
		err.Error() != "imageops: color_jitter: invalid argument: brightness's range [1.5, 0.5] runs backwards" {
		t.Errorf("a backward range: %v", err)
	}
	// All off: an equal copy.
	got, err = ColorJitter(img, JitterAmount(0), JitterAmount(0), JitterAmount(0), &fixedRNG{v: seq})
	if err != nil || got == img || string(got.Data) != string(img.Data) {
		t.Errorf("all amounts 0: %v, same tensor %v", err, got == img)
	}
}

// TestColorArguments: what the colour and geometry functions refuse.
func TestColorArguments(t *testing.T) {
	rgb := synthetic(tensor.Uint8, 2, 2, 3)
	rgba := synthetic(tensor.Uint8, 2, 2, 4)
	ints := tensor.New(tensor.Int64, 2, 2, 3)
	flat := tensor.New(tensor.Uint8, 4, 3)
	for _, tc := range []struct {
		name string
		run  func() (*tensor.Tensor, error)
		want string
	}{
		{"4 channels", func() (*tensor.Tensor, error) { return AdjustContrast(rgba, 1) }, "imageops: adjust_contrast: invalid argument: want 1 or 3 channels, got 4 ([2 2 4])"},
		{"int64", func() (*tensor.Tensor, error) { return AdjustBrightness(ints, 1) }, "imageops: adjust_brightness: invalid argument: want a uint8 or float32 image, got int64"},
		{"negative", func() (*tensor.Tensor, error) { return AdjustSaturation(rgb, -0.5) }, "imageops: adjust_saturation: invalid argument: the factor must be a number from 0 to 3.4e38 (float32's range), got -0.5"},
		{"NaN", func() (*tensor.Tensor, error) { return AdjustBrightness(rgb, math.NaN()) }, "imageops: adjust_brightness: invalid argument: the factor must be a number from 0 to 3.4e38 (float32's range), got NaN"},
		{"infinite", func() (*tensor.Tensor, error) {
			return ColorJitter(rgb, JitterAmount(math.Inf(1)), JitterAmount(0), JitterAmount(0), &fixedRNG{v: []float64{0.5}})
		}, "imageops: color_jitter: invalid argument: brightness must be a number from 0 to 3.4e38 (float32's range), got +Inf"},
		{"past float32", func() (*tensor.Tensor, error) { return AdjustBrightness(rgb, 1e39) }, "imageops: adjust_brightness: invalid argument: the factor must be a number from 0 to 3.4e38 (float32's range), got 1e+39"},
		{"gray to 2", func() (*tensor.Tensor, error) { return Grayscale(rgb, 2) }, "imageops: grayscale: invalid argument: channels must be 1 or 3, got 2"},
		{"rank 2 flip", func() (*tensor.Tensor, error) { return FlipUpDown(flat) }, "imageops: flip_up_down: invalid argument: want an HWC image of rank 3, got uint8[4 3]"},
		{"rank 2 rot90", func() (*tensor.Tensor, error) { return Rot90(flat, 1) }, "imageops: rot90: invalid argument: want an HWC image of rank 3, got uint8[4 3]"},
	} {
		if _, err := tc.run(); err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v\nwant %s", tc.name, err, tc.want)
		}
	}
}

// BenchmarkColor times the colour functions on a 224×224 RGB image, the
// size they meet after random_resized_crop.
func BenchmarkColor(b *testing.B) {
	for _, dt := range []tensor.DType{tensor.Uint8, tensor.Float32} {
		img := synthetic(dt, 224, 224, 3)
		for _, op := range []struct {
			name string
			fn   func() (*tensor.Tensor, error)
		}{
			{"brightness", func() (*tensor.Tensor, error) { return AdjustBrightness(img, 1.3) }},
			{"contrast", func() (*tensor.Tensor, error) { return AdjustContrast(img, 1.3) }},
			{"saturation", func() (*tensor.Tensor, error) { return AdjustSaturation(img, 1.3) }},
			{"jitter", func() (*tensor.Tensor, error) {
				return ColorJitter(img, JitterAmount(0.4), JitterAmount(0.4), JitterAmount(0.4), &fixedRNG{v: []float64{0.3, 0.6, 0.2, 0.7, 0.9}})
			}},
			{"grayscale", func() (*tensor.Tensor, error) { return Grayscale(img, 3) }},
			{"rot90", func() (*tensor.Tensor, error) { return Rot90(img, 1) }},
			{"flip_up_down", func() (*tensor.Tensor, error) { return FlipUpDown(img) }},
		} {
			b.Run(op.name+"/"+dt.String(), func(b *testing.B) {
				b.SetBytes(int64(len(img.Data)))
				for b.Loop() {
					out, err := op.fn()
					if err != nil {
						b.Fatal(err)
					}
					out.Recycle()
				}
			})
		}
	}
}

// TestColorRefusesNormalizedFloats: a float32 image far outside [0, 1],
// as after normalize, is refused: blended and clamped to [0, 1], 44 to 68
// % of its values became 0 without a word (a new user's test; torchvision
// clamps as silently). The overshoot of a bicubic resize passes.
func TestColorRefusesNormalizedFloats(t *testing.T) {
	img := tensor.New(tensor.Float32, 2, 2, 3)
	v := img.Float32()
	for i := range v {
		v[i] = float32(i)/6 - 0.1 // -0.1 … 1.73
	}
	_, err := AdjustContrast(img, 1.2)
	if want := "imageops: adjust_contrast: invalid argument: the float32 image's values run from -0.1 to 1.73, and it blends them clamped to [0, 1], as to_float gives them: after normalize they would be lost; apply it before normalize"; err == nil || err.Error() != want {
		t.Errorf("normalized: %v\nwant %s", err, want)
	}
	if _, err := ColorJitter(img, JitterAmount(0.4), JitterAmount(0), JitterAmount(0), &fixedRNG{v: []float64{0.5}}); err == nil || !strings.Contains(err.Error(), "imageops: color_jitter: invalid argument: the float32 image's values run from") {
		t.Errorf("color_jitter of it: %v", err)
	}
	// grayscale clamps nothing, and takes it as torchvision does.
	if _, err := Grayscale(img, 1); err != nil {
		t.Errorf("grayscale of it: %v", err)
	}
	for i := range v {
		v[i] = float32(i)/7.3 - 0.21 // -0.21 … 1.30: a bicubic upscale's overshoot (a re-test saw -0.209 to 1.26 on a photo)
	}
	for name, f := range map[string]func(*tensor.Tensor, float64) (*tensor.Tensor, error){"brightness": AdjustBrightness, "contrast": AdjustContrast, "saturation": AdjustSaturation} {
		if _, err := f(img, 1.2); err != nil {
			t.Errorf("%s of an overshoot: %v", name, err)
		}
	}
}
