package expression_test

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"path/filepath"
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

// TestReadFileFeedsDecodeFromPool: read_file as the bytes of a decode reads
// into a pooled buffer (the patcher swaps in __read_file_pooled), with the
// same result as a plain read; read_file elsewhere is untouched; a missing
// file is the same error either way.
func TestReadFileFeedsDecodeFromPool(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "g.jpg")
	if err := os.WriteFile(path, gradientJPEG(t, 96, 64), 0o644); err != nil {
		t.Fatal(err)
	}
	in := sample.Schema{Fields: []sample.Field{{Name: "path", Type: sample.TString}, {Name: "b", Type: sample.TBytes}}}
	compile := func(src string) *expression.Program {
		p, err := expression.Default().Compile(src, in, sample.Any)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		return p
	}
	pooled := compile("decode_image(read_file(path), 3) | resize(32, 32) | to_float()")
	if d := pooled.Disassemble(); !strings.Contains(d, "__read_file_pooled") {
		t.Errorf("read_file inside a decode is not pooled:\n%s", d)
	}
	plain := compile("decode_image(b, 3) | resize(32, 32) | to_float()")
	raw, _ := os.ReadFile(path)
	for i := 0; i < 3; i++ { // again, from a recycled buffer
		a, err := pooled.Run(nil, map[string]any{"path": path, "b": []byte(nil)})
		if err != nil {
			t.Fatal(err)
		}
		b, err := plain.Run(nil, map[string]any{"path": path, "b": raw})
		if err != nil {
			t.Fatal(err)
		}
		if !tensor.Equal(a.(*tensor.Tensor), b.(*tensor.Tensor)) {
			t.Fatalf("run %d: decoding a pooled read differs from decoding the file's bytes", i)
		}
	}
	if d := compile("read_file(path)").Disassemble(); strings.Contains(d, "__read_file_pooled") {
		t.Errorf("a bare read_file was pooled:\n%s", d)
	}
	missing := map[string]any{"path": filepath.Join(dir, "nope.jpg"), "b": []byte(nil)}
	_, err1 := pooled.Run(nil, missing)
	_, err2 := compile("read_file(path)").Run(nil, missing)
	if err1 == nil || err2 == nil || !strings.Contains(err1.Error(), "no such file") || !strings.Contains(err2.Error(), "no such file") {
		t.Errorf("missing file: pooled %v, plain %v", err1, err2)
	}
}
