package expression_test

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"strings"
	"testing"

	"github.com/piperun/piperun/expression"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/tensor"
)

func gradientJPEG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), uint8(x ^ y), 255})
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func run(t *testing.T, src string, env map[string]any) (*expression.Program, *tensor.Tensor) {
	t.Helper()
	in := sample.Schema{Fields: []sample.Field{{Name: "b", Type: sample.Type{Kind: sample.Bytes}}}}
	p, err := expression.Default().Compile(src, in, sample.Any)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	v, err := p.Run(nil, env)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return p, v.(*tensor.Tensor)
}

// TestFusedToFloat: to_float of a fused decode+resize becomes one call
// whose uint8 intermediate never leaves a pooled buffer; it must give
// exactly to_float of the uint8 result, and a recyclable tensor.
func TestFusedToFloat(t *testing.T) {
	env := map[string]any{"b": gradientJPEG(t, 320, 240)}
	p, f := run(t, "decode_image(b, 3) | resize(56, 48) | to_float()", env)
	if got := p.Type.String(); got != "tensor<float32>[56 48 3]" {
		t.Errorf("type %s, want tensor<float32>[56 48 3]", got)
	}
	_, u := run(t, "decode_image(b, 3) | resize(56, 48)", env)
	if f.String() != "float32[56 48 3]" || u.String() != "uint8[56 48 3]" {
		t.Fatalf("got %s and %s", f, u)
	}
	if d := p.Disassemble(); !strings.Contains(d, "__decode_resize_float") {
		t.Errorf("the chain was not fused into one call:\n%s", d)
	}
	if !f.Recyclable() {
		t.Error("the fused result is not recyclable")
	}
	ff := f.Float32()
	for i, v := range u.Uint8() {
		if ff[i] != float32(v)/255 {
			t.Fatalf("element %d: fused %v, unfused %v/255", i, ff[i], v)
		}
	}
}
