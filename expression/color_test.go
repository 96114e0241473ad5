package expression_test

import (
	"strings"
	"testing"

	"github.com/piperun/piperun/expression"
	"github.com/piperun/piperun/imageops"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/tensor"
)

// TestColorFunctionTypes: what validate infers for the colour and
// geometry functions, and what it refuses.
func TestColorFunctionTypes(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{
		{Name: "u8", Type: sample.TensorOf(tensor.Uint8, 4, 6, 3)},
		{Name: "sq", Type: sample.TensorOf(tensor.Uint8, 5, 5, 3)},
		{Name: "rgba", Type: sample.TensorOf(tensor.Uint8, 4, 6, 4)},
		{Name: "i64", Type: sample.TensorOf(tensor.Int64, 4, 6, 3)},
		{Name: "k", Type: sample.TInt},
		{Name: "path", Type: sample.TString},
	}}
	const at = " (line 1, column %s of the expression)"
	for _, tc := range []struct{ src, want, typ string }{
		{`rot90(u8, 1)`, "", "tensor<uint8>[6 4 3]"},
		{`rot90(u8, -3)`, "", "tensor<uint8>[6 4 3]"},
		{`rot90(u8, 2)`, "", "tensor<uint8>[4 6 3]"},
		{`rot90(u8, k)`, "", "tensor<uint8>[? ? 3]"},
		{`rot90(sq, k)`, "", "tensor<uint8>[5 5 3]"},
		{`rot90(u8, 1.5)`, "rot90: argument 2 must be int64, got float64" + strings.Replace(at, "%s", "11", 1), ""},
		{`grayscale(u8)`, "", "tensor<uint8>[4 6 1]"},
		{`grayscale(to_float(u8), 3)`, "", "tensor<float32>[4 6 3]"},
		{`grayscale(u8, k)`, "", "tensor<uint8>[4 6 ?]"},
		{`grayscale(u8, 2)`, "grayscale: argument 2 must be 1 or 3 (the channels of the gray image), got 2" + strings.Replace(at, "%s", "15", 1), ""},
		{`grayscale(rgba)`, "grayscale: argument 1 must have 1 or 3 channels, got tensor<uint8>[4 6 4] (decode_image(…, 3) gives 3)" + strings.Replace(at, "%s", "11", 1), ""},
		{`adjust_brightness(u8, 1.2)`, "", "tensor<uint8>[4 6 3]"},
		{`adjust_contrast(to_float(u8), k)`, "", "tensor<float32>[4 6 3]"},
		{`adjust_saturation(u8, -0.5)`, "adjust_saturation: argument 2 (factor) must be at least 0, got -0.5" + strings.Replace(at, "%s", "23", 1), ""},
		{`adjust_contrast(i64, 1)`, "adjust_contrast: argument 1 must be a uint8 or float32 image, got tensor<int64>[4 6 3]" + strings.Replace(at, "%s", "17", 1), ""},
		{`adjust_brightness(u8, path)`, "adjust_brightness: argument 2 must be float64, got string" + strings.Replace(at, "%s", "23", 1), ""},
		{`color_jitter(u8, 0.4, 0.4, 0.4)`, "", "tensor<uint8>[4 6 3]"},
		{`color_jitter(u8, [0.5, 1.5], 0, [0.8, 1.2])`, "", "tensor<uint8>[4 6 3]"},
		{`color_jitter(u8, [1.5, 0.5], 0, 0)`, "color_jitter: argument 2 (brightness) is a range [lo, hi] that needs 0 <= lo <= hi, got [1.5, 0.5]" + strings.Replace(at, "%s", "18", 1), ""},
		{`color_jitter(u8, ["a", "b"], 0, 0)`, "color_jitter: argument 2 (brightness) must be a number or a list [lo, hi] of numbers, got list<string>" + strings.Replace(at, "%s", "18", 1), ""},
		{`color_jitter(u8, [0.5], 0, 0)`, "color_jitter: argument 2 (brightness) must be a number or a list [lo, hi] of two numbers, got list" + strings.Replace(at, "%s", "18", 1), ""},
		{`color_jitter(u8, 0.4, -1, 0)`, "color_jitter: argument 3 (contrast) must be at least 0, got -1" + strings.Replace(at, "%s", "23", 1), ""},
		{`color_jitter(u8, 0.4)`, "color_jitter(img, brightness, contrast, saturation): wrong number of arguments: got 2, want 4" + strings.Replace(at, "%s", "1", 1), ""},
		{`flip_up_down(u8, 0.5)`, "", "tensor<uint8>[4 6 3]"},
		{`flip_up_down(u8, 2)`, "flip_up_down: probability 2 is outside [0, 1]" + strings.Replace(at, "%s", "1", 1), ""},
		{`u8 | color_jitter(0.2, 0.2, 0.2) | flip_up_down(0.5) | rot90(1) | grayscale(3) | to_float()`, "", "tensor<float32>[6 4 3]"},
	} {
		checkCompile(t, in, tc.src, tc.want, tc.typ)
	}
}

// TestColorFunctionsRun: the expression calls give imageops' results, a
// random one draws per sample and repeats for the same sample, and values
// validate could not see are checked as the run meets them.
func TestColorFunctionsRun(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{{Name: "x", Type: sample.Type{Kind: sample.Tensor}}, {Name: "v", Type: sample.TFloat}}}
	img := tensor.New(tensor.Uint8, 4, 6, 3)
	for i := range img.Data {
		img.Data[i] = uint8(i * 37 % 256)
	}
	run := func(src string, v float64, id int64) (*tensor.Tensor, error) {
		p, err := expression.Default().Compile(src, in, sample.Any)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		out, err := p.Run(nil, map[string]any{"x": img, "v": v, expression.CtxVar: &expression.RunCtx{Seed: 7, ID: id}})
		if err != nil {
			return nil, err
		}
		return out.(*tensor.Tensor), nil
	}
	for _, tc := range []struct {
		src  string
		want func() (*tensor.Tensor, error)
	}{
		{`rot90(x, 1)`, func() (*tensor.Tensor, error) { return imageops.Rot90(img, 1) }},
		{`rot90(x, 7)`, func() (*tensor.Tensor, error) { return imageops.Rot90(img, 3) }},
		{`flip_up_down(x, 1)`, func() (*tensor.Tensor, error) { return imageops.FlipUpDown(img) }},
		{`flip_up_down(x, 0)`, func() (*tensor.Tensor, error) { return img, nil }},
		{`grayscale(x, 3)`, func() (*tensor.Tensor, error) { return imageops.Grayscale(img, 3) }},
		{`adjust_brightness(x, v)`, func() (*tensor.Tensor, error) { return imageops.AdjustBrightness(img, 1.5) }},
		{`adjust_contrast(x, v)`, func() (*tensor.Tensor, error) { return imageops.AdjustContrast(img, 1.5) }},
		{`adjust_saturation(x, v)`, func() (*tensor.Tensor, error) { return imageops.AdjustSaturation(img, 1.5) }},
	} {
		got, err := run(tc.src, 1.5, 0)
		want, werr := tc.want()
		if err != nil || werr != nil {
			t.Fatalf("%s: %v, %v", tc.src, err, werr)
		}
		if got.String() != want.String() || string(got.Data) != string(want.Data) {
			t.Errorf("%s: %s, want %s", tc.src, got, want)
		}
	}
	// color_jitter: one sample's draw repeats; the 16 samples' draws are
	// not all one.
	a, _ := run(`color_jitter(x, 0.4, 0.4, 0.4)`, 0, 3)
	b, _ := run(`color_jitter(x, 0.4, 0.4, 0.4)`, 0, 3)
	if string(a.Data) != string(b.Data) {
		t.Error("color_jitter drew differently for the same sample")
	}
	distinct := map[string]bool{}
	for id := range int64(16) {
		c, err := run(`color_jitter(x, 0.4, 0.4, 0.4)`, 0, id)
		if err != nil {
			t.Fatal(err)
		}
		distinct[string(c.Data)] = true
	}
	if len(distinct) < 15 {
		t.Errorf("color_jitter gave %d distinct images over 16 samples", len(distinct))
	}
	// Computed factors and probabilities are checked where they run.
	for _, tc := range []struct {
		src  string
		v    float64
		want string
	}{
		{`adjust_contrast(x, v)`, -1, "adjust_contrast: invalid argument: the factor must be a number from 0 to 3.4e38 (float32's range), got -1"},
		{`color_jitter(x, v, 0, 0)`, -0.5, "color_jitter: argument 2 (brightness) must be at least 0, got -0.5"},
		{`flip_up_down(x, v)`, 3, "probability 3 is outside [0, 1]"},
		{`grayscale(x, int(v))`, 2, "grayscale: invalid argument: channels must be 1 or 3, got 2"},
		{`color_jitter(x, [v, 0.5], 0, 0)`, 2, "argument 2 (brightness) is a range [lo, hi] that needs 0 <= lo <= hi, got [2, 0.5]"},
	} {
		if _, err := run(tc.src, tc.v, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s with v %v: %v, want %q", tc.src, tc.v, err, tc.want)
		}
	}
}

// TestRandomGrayscaleOfAFlatTensor: a tensor whose rank validate could
// not know is refused at run time, not indexed past its shape, and an
// image it could never take is refused whatever the draw.
func TestRandomGrayscaleOfAFlatTensor(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{{Name: "x", Type: sample.Type{Kind: sample.Tensor}}}}
	p, err := expression.Default().Compile(`random_grayscale(x, 1)`, in, sample.Any)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Run(nil, map[string]any{"x": tensor.New(tensor.Uint8, 4), expression.CtxVar: &expression.RunCtx{Seed: 1}})
	if err == nil || !strings.Contains(err.Error(), "random_grayscale: invalid argument: want an HWC image of rank 3, got uint8[4]") {
		t.Errorf("random_grayscale of a 1-D tensor: %v", err)
	}
	// Checked whatever the draw: at p 0 too.
	p, err = expression.Default().Compile(`random_grayscale(x, 0)`, in, sample.Any)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Run(nil, map[string]any{"x": tensor.New(tensor.Uint8, 2, 2, 4), expression.CtxVar: &expression.RunCtx{Seed: 1}})
	if err == nil || !strings.Contains(err.Error(), "random_grayscale: invalid argument: want 1 or 3 channels, got 4") {
		t.Errorf("random_grayscale(x, 0) of an RGBA image: %v", err)
	}
}

// TestRandomApply: uniform(lo, hi) draws a float per call site and sample,
// and random_grayscale(img, p) is torchvision's RandomGrayscale, so that
// RandomApply and RandomGrayscale can be written (a computer-vision
// engineer's test found no way but a flip of a constant tensor as a coin).
func TestRandomApply(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{
		{Name: "x", Type: sample.TensorOf(tensor.Uint8, 4, 6, 3)},
		{Name: "g", Type: sample.TensorOf(tensor.Uint8, 4, 6, 1)},
		{Name: "rgba", Type: sample.TensorOf(tensor.Uint8, 4, 6, 4)},
	}}
	for _, tc := range []struct{ src, want, typ string }{
		{`uniform(0, 1)`, "", "float64"},
		{`uniform(0, 1) < 0.8 ? color_jitter(x, 0.4, 0.4, 0.4) : x`, "", "tensor<uint8>[4 6 3]"},
		{`random_grayscale(x, 0.2)`, "", "tensor<uint8>[4 6 3]"},
		{`random_grayscale(g, 0.2)`, "", "tensor<uint8>[4 6 1]"},
		{`uniform(1, 0)`, "uniform: lo 1 is more than hi 0 (line 1, column 1 of the expression)", ""},
		{`uniform(0)`, "uniform(lo, hi): wrong number of arguments: got 1, want 2 (line 1, column 1 of the expression)", ""},
		{`random_grayscale(x, 1.5)`, "random_grayscale: probability 1.5 is outside [0, 1] (line 1, column 1 of the expression)", ""},
		{`random_grayscale(rgba, 0.2)`, "random_grayscale: argument 1 must have 1 or 3 channels, got tensor<uint8>[4 6 4] (decode_image(…, 3) gives 3) (line 1, column 18 of the expression)", ""},
	} {
		checkCompile(t, in, tc.src, tc.want, tc.typ)
	}
	img := tensor.New(tensor.Uint8, 4, 6, 3)
	for i := range img.Data {
		img.Data[i] = uint8(i * 37 % 256)
	}
	run := func(src string, id int64) any {
		p, err := expression.Default().Compile(src, in, sample.Any)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		v, err := p.Run(nil, map[string]any{"x": img, expression.CtxVar: &expression.RunCtx{Seed: 7, ID: id}})
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		return v
	}
	// uniform: in [lo, hi), the same for a sample, about a fifth under 0.2.
	under := 0
	for id := range int64(1000) {
		u := run(`uniform(0, 1)`, id).(float64)
		if u < 0 || u >= 1 || run(`uniform(0, 1)`, id).(float64) != u {
			t.Fatalf("sample %d: uniform %v, or another draw for the same sample", id, u)
		}
		if u < 0.2 {
			under++
		}
	}
	if under < 150 || under > 250 {
		t.Errorf("%d of 1000 draws under 0.2, want about 200", under)
	}
	// Two call sites draw apart.
	if pair := run(`[uniform(0, 1), uniform(0, 1)]`, 5).([]any); pair[0] == pair[1] {
		t.Errorf("two calls drew the same %v", pair[0])
	}
	// random_grayscale: all or nothing at p 1 and 0, keeping 3 channels.
	gray, _ := imageops.Grayscale(img, 3)
	if got := run(`random_grayscale(x, 1)`, 1).(*tensor.Tensor); string(got.Data) != string(gray.Data) {
		t.Error("random_grayscale(x, 1) is not the 3-channel gray")
	}
	if got := run(`random_grayscale(x, 0)`, 1).(*tensor.Tensor); string(got.Data) != string(img.Data) {
		t.Error("random_grayscale(x, 0) changed the image")
	}
}

// checkCompile compiles src against in and checks the error (want, "" for
// none) or, when it compiles, the type it infers (typ).
func checkCompile(t *testing.T, in sample.Schema, src, want, typ string) {
	t.Helper()
	p, err := expression.Default().Compile(src, in, sample.Any)
	got := ""
	if err != nil {
		got = err.Error()
	}
	if got != want {
		t.Errorf("%s:\ngot  %q\nwant %q", src, got, want)
		return
	}
	if err == nil && p.Type.String() != typ {
		t.Errorf("%s: type %s, want %s", src, p.Type, typ)
	}
}
