package expression_test

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/piperun/piperun/expression"
	"github.com/piperun/piperun/imageops"
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

// TestLiteralPathsResolveInTheSpecsDir: a relative path written as text
// in read_file resolves against the directory PathsIn names (the spec's),
// also inside a decode, where the read is pooled; an absolute one, and a
// path from the data, are read as they are (a design audit: a spec reading
// read_file("imgs/c.jpg") failed when run from another directory).
func TestLiteralPathsResolveInTheSpecsDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "imgs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "imgs", "a.txt"), []byte("spec's"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "g.jpg"), gradientJPEG(t, 8, 4), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := expression.Default().PathsIn(dir)
	in := sample.Schema{Fields: []sample.Field{{Name: "p", Type: sample.TString}}}
	for _, tc := range []struct{ src, p, want string }{
		{`string(read_file("imgs/a.txt"))`, "", "spec's"},
		{`string(read_file("imgs/../imgs/a.txt"))`, "", "spec's"},
		{`string(read_file("` + filepath.Join(dir, "imgs", "a.txt") + `"))`, "", "spec's"},
		{`string(read_file(p))`, filepath.Join(dir, "imgs", "a.txt"), "spec's"},
		{`string(read_file(p))`, "imgs/a.txt", "open imgs/a.txt: no such file or directory"},
		{`string(shape(decode_image(read_file("g.jpg"), 1)))`, "", "[4 8 1]"},
		// A path built of strings alone is as written (a cache operator
		// found these read from the working folder, and left out of the
		// cache's fingerprint).
		{`string(read_file("imgs/" + "a.txt"))`, "", "spec's"},
		{`let f = "imgs/a.txt"; string(read_file(f))`, "", "spec's"},
		{`let d = "imgs/"; let f = d + "a.txt"; string(read_file(f))`, "", "spec's"},
	} {
		p, err := reg.Compile(tc.src, in, sample.Any)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		v, err := p.Run(nil, map[string]any{"p": tc.p})
		got := fmt.Sprint(v)
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s with p=%q: %s, want %s", tc.src, tc.p, got, tc.want)
		}
	}
	// All of them are in the fingerprint, as files the expression names.
	want := filepath.Join(dir, "imgs", "a.txt")
	for _, src := range []string{`read_file("imgs/" + "a.txt")`, `let f = "imgs/a.txt"; read_file(f)`, `let d = "imgs/"; let f = d + "a.txt"; read_file(f)`} {
		p, err := reg.Compile(src, in, sample.Any)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got := p.LiteralFiles(); len(got) != 1 || got[0] != want {
			t.Errorf("%s names files %q, want [%s]", src, got, want)
		}
	}
	// A path from the data is not one.
	if p, err := reg.Compile(`let f = p + ".txt"; read_file(f)`, in, sample.Any); err != nil || len(p.LiteralFiles()) != 0 {
		t.Errorf("a path from the data: %v, files %v", err, p.LiteralFiles())
	}
	// The registry it came from is untouched.
	p, err := expression.Default().Compile(`read_file("imgs/a.txt")`, in, sample.Any)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(nil, map[string]any{"p": ""}); err == nil || !strings.Contains(err.Error(), "open imgs/a.txt:") {
		t.Errorf("Default() read %v", err)
	}
}

// TestCompileDeferred: a trailing to_float, or to_float then normalize with
// constant mean and std, of a uint8 image is left out of the program and
// described in its type; anything else compiles as Compile does.
func TestCompileDeferred(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{
		{Name: "b", Type: sample.Type{Kind: sample.Bytes}},
		{Name: "f", Type: sample.TensorOf(tensor.Float32, 4, 4, 3)},
		{Name: "m", Type: sample.TFloat},
	}}
	for _, tc := range []struct {
		src, typ string
		tables   int // 0: not deferred
	}{
		{`decode_image(b, 3) | resize(8, 8) | to_float()`, "tensor<uint8→float32>[8 8 3]", 1},
		{`to_float(decode_image(b, 3) | resize(8, 8))`, "tensor<uint8→float32>[8 8 3]", 1},
		{`decode_image(b, 3) | random_resized_crop(8, 8) | flip_left_right(0.5) | to_float() | normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])`, "tensor<uint8→float32>[8 8 3]", 3},
		{`decode_image(b, 1) | resize(8, 8) | to_float() | normalize(0.5, 0.25)`, "tensor<uint8→float32>[8 8 1]", 1},
		// Not deferred: the mean is not a constant, the channels are unknown
		// for a per-channel list, the input is already float, or something
		// follows the conversion.
		{`decode_image(b, 3) | resize(8, 8) | to_float() | normalize(m, 0.25)`, "tensor<float32>[8 8 3]", 0},
		{`decode_image(b, 0) | resize(8, 8) | to_float() | normalize([0.1, 0.2, 0.3], [1, 1, 1])`, "tensor<float32>[8 8 ?]", 0},
		{`to_float(f)`, "tensor<float32>[4 4 3]", 0},
		{`transpose(decode_image(b, 3) | resize(8, 8) | to_float(), [2, 0, 1])`, "tensor<float32>[3 8 8]", 0},
		{`decode_image(b, 3) | resize(8, 8)`, "tensor<uint8>[8 8 3]", 0},
	} {
		p, err := expression.Default().CompileDeferred(tc.src, in)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		got := 0
		if p.Type.Deferred != nil {
			got = p.Type.Deferred.Channels()
		}
		if p.Type.String() != tc.typ || got != tc.tables {
			t.Errorf("%s:\n got %s with %d tables, want %s with %d", tc.src, p.Type, got, tc.typ, tc.tables)
		}
	}
	// The deferred program returns the uint8 image; its conversion gives
	// exactly what the whole expression gives.
	src := `decode_image(b, 3) | resize(8, 8) | to_float() | normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])`
	env := map[string]any{"b": gradientJPEG(t, 40, 30)}
	_, want := run(t, src, env)
	p, err := expression.Default().CompileDeferred(src, in)
	if err != nil {
		t.Fatal(err)
	}
	v, err := p.Run(nil, env)
	if err != nil {
		t.Fatal(err)
	}
	u8 := v.(*tensor.Tensor)
	if u8.DType != tensor.Uint8 {
		t.Fatalf("deferred program gives %s", u8)
	}
	got := make([]float32, u8.Len())
	p.Type.Deferred.Into(got, u8)
	for i, w := range want.Float32() {
		if got[i] != w {
			t.Fatalf("element %d: %v, want %v", i, got[i], w)
		}
	}
}

func TestUses(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want bool
	}{
		{`shape(image)`, true},
		{`image_id + 1`, false},
		{`$env["image"]`, true},
		{`$env.image`, true},
		{`label * 2`, false},
		// Other fields by a constant key: not the image.
		{`$env["image/class/label"]`, false},
		{`$env["label"] + $env.index`, false},
		// $env by a computed key, or whole, may read anything.
		{`$env["im" + "age"]`, true},
		{`$env[name]`, true},
		{`len($env)`, true},
		{`(`, true},
	} {
		if got := expression.Uses(tc.src, "image"); got != tc.want {
			t.Errorf("Uses(%q, image) = %v, want %v", tc.src, got, tc.want)
		}
	}
}

// TestImageDTypeChecks: normalize and to_float refuse at compile time a
// tensor whose dtype is known and which they would refuse at run time
// (found by a user test: normalize of a uint8 image and to_float of an
// int64 tensor passed validate, and apply failed on the first sample). A
// dtype known only at run time still compiles.
func TestImageDTypeChecks(t *testing.T) {
	lut, err := imageops.FloatTable(nil, nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	deferred := sample.TensorOf(tensor.Uint8, 2, 2, 3)
	deferred.Deferred = lut
	in := sample.Schema{Fields: []sample.Field{
		{Name: "path", Type: sample.TString},
		{Name: "u8", Type: sample.TensorOf(tensor.Uint8, 2, 2, 3)},
		{Name: "f32", Type: sample.TensorOf(tensor.Float32, 2, 2, 3)},
		{Name: "i64", Type: sample.TensorOf(tensor.Int64, 2, 2, 3)},
		{Name: "f64", Type: sample.TensorOf(tensor.Float64, -1, -1, 3)},
		{Name: "unknown", Type: sample.Type{Kind: sample.Tensor}},
		{Name: "shaped", Type: sample.Type{Kind: sample.Tensor, Shape: []int{2, 2, 3}}},
		{Name: "any", Type: sample.TAny},
		{Name: "deferred", Type: deferred},
	}}
	const (
		toFloatFirst = `normalize: argument 1 must be a float32 image, got tensor<uint8>[2 2 3]: apply to_float first`
		castInt      = `to_float: argument 1 must be a uint8 image (to_float scales its levels 0..255 to [0, 1]), got tensor<int64>[2 2 3]: use cast(x, "uint8") first if it holds such levels, or cast(x, "float32") instead to convert without scaling`
	)
	for _, tc := range []struct{ src, want, typ string }{
		// normalize takes float32 alone.
		{`decode_image(read_file(path), 3) | resize(2, 2) | normalize(100, 2)`, toFloatFirst + ` (line 1, column 51 of the expression)`, ""},
		{`normalize(u8, 100, 2)`, toFloatFirst + ` (line 1, column 11 of the expression)`, ""},
		{`normalize(i64, 0.5, 0.2)`, `normalize: argument 1 must be a float32 image, got tensor<int64>[2 2 3]: convert it with cast(x, "float32") first (line 1, column 11 of the expression)`, ""},
		{`normalize(f64, 0.5, 0.2)`, `normalize: argument 1 must be a float32 image, got tensor<float64>[? ? 3]: convert it with cast(x, "float32") first (line 1, column 11 of the expression)`, ""},
		{`normalize(cast(u8, "int32"), 0.5, 0.2)`, `normalize: argument 1 must be a float32 image, got tensor<int32>[2 2 3]: convert it with cast(x, "float32") first (line 1, column 11 of the expression)`, ""},
		{`normalize(f32, 0.5, 0.2)`, "", "tensor<float32>[2 2 3]"},
		{`normalize(to_float(u8), 0.5, 0.2)`, "", "tensor<float32>[2 2 3]"},
		{`normalize(cast(i64, "float32"), 0.5, 0.2)`, "", "tensor<float32>[2 2 3]"},
		{`normalize(deferred, 0.5, 0.2)`, "", "tensor<float32>[2 2 3]"},
		{`normalize(unknown, 0.5, 0.2)`, "", "tensor<float32>[?]"},
		{`normalize(shaped, 0.5, 0.2)`, "", "tensor<float32>[2 2 3]"},
		{`normalize(any, 0.5, 0.2)`, "", "tensor<float32>[?]"},
		// to_float scales uint8 and passes float32 through.
		{`to_float(cast(u8, "int64"))`, castInt + ` (line 1, column 10 of the expression)`, ""},
		{`to_float(i64)`, castInt + ` (line 1, column 10 of the expression)`, ""},
		{`to_float(f64)`, `to_float: argument 1 must be a uint8 image (to_float scales its levels 0..255 to [0, 1]), got tensor<float64>[? ? 3]: use cast(x, "uint8") first if it holds such levels, or cast(x, "float32") instead to convert without scaling (line 1, column 10 of the expression)`, ""},
		{`to_float(u8)`, "", "tensor<float32>[2 2 3]"},
		{`to_float(f32)`, "", "tensor<float32>[2 2 3]"},
		{`to_float(cast(i64, "uint8"))`, "", "tensor<float32>[2 2 3]"},
		{`to_float(unknown)`, "", "tensor<float32>[?]"},
		{`to_float(shaped)`, "", "tensor<float32>[2 2 3]"},
		{`to_float(any)`, "", "tensor<float32>[?]"},
		// A wrong count in a chain that would be fused names the call as
		// written, not the fused one ("resize(
		// decode_image(bytes, channels), h, w[, method]): got 3, want 4 to 5").
		{`decode_image(read_file(path), 3) | resize(32)`, `resize(img, h, w[, method]): wrong number of arguments: got 2, want 3 to 4 (line 1, column 36 of the expression)`, ""},
		{`decode_image(read_file(path), 3) | random_resized_crop(32)`, `random_resized_crop(img, h, w[, min_scale[, max_scale]]): wrong number of arguments: got 2, want 3 to 5 (line 1, column 36 of the expression)`, ""},
		{`decode_image(read_file(path)) | resize(32, 32)`, `decode_image(bytes, channels[, max_pixels]): wrong number of arguments: got 1, want 2 to 3 (line 1, column 1 of the expression)`, ""},
		// decode_image's max_pixels has no place in the fused calls: such a
		// chain runs as written (max_pixels was read as h).
		{`decode_image(read_file(path), 3, 1000000) | resize(32, 32, "area")`, "", "tensor<uint8>[32 32 3]"},
		{`decode_image(read_file(path), 3, 1000000) | random_resized_crop(32, 32)`, "", "tensor<uint8>[32 32 3]"},
		{`decode_image(read_file(path), 3) | resize(32, 32) | to_float(1)`, `to_float(img): wrong number of arguments: got 2, want 1 (line 1, column 53 of the expression)`, ""},
		// A crop larger than a known image fails in validate, not in
		// every sample.
		{`center_crop(resize(u8, 32, 32), 64, 64)`, `center_crop: a 64×64 (height×width) crop does not fit the 32×32 image (tensor<uint8>[32 32 3]) (line 1, column 1 of the expression)`, ""},
		{`random_crop(resize(u8, 32, 32), 16, 33)`, `random_crop: a 16×33 (height×width) crop does not fit the 32×32 image (tensor<uint8>[32 32 3]) (line 1, column 1 of the expression)`, ""},
		{`center_crop(resize(u8, 32, 32), 32, 32)`, "", "tensor<uint8>[32 32 3]"},
		{`random_crop(f64, 64, 64)`, "", "tensor<float64>[64 64 3]"},
		// A channels-first tensor is refused by the HWC functions.
		{`flip_left_right(transpose(resize(u8, 4, 5), [2, 0, 1]), 1.0)`, `flip_left_right: argument 1 looks channels-first (tensor<uint8>[3 4 5]): image functions take HWC [H, W, C]; apply them before transpose (line 1, column 17 of the expression)`, ""},
		{`resize(transpose(u8, [2, 0, 1]), 32, 32)`, "", "tensor<uint8>[32 32 2]"},
		// [3, ?, ?] may be a transposed decode or an HWC image of unknown
		// channels resized to a height of 3 and a computed width: validate
		// lets both pass, and the run checks the tensor
		// (TestImageFunctionsCheckAtRunTime).
		{`flip_left_right(transpose(decode_image(read_file(path), 3), [2, 0, 1]), 0.5)`, "", "tensor<uint8>[3 ? ?]"},
		{`flip_left_right(resize(decode_image(read_file(path), 0), 3, int(len(path))), 0.5)`, "", "tensor<uint8>[3 ? ?]"},
		{`flip_left_right(decode_image(read_file(path), 3), 0.5)`, "", "tensor<uint8>[? ? 3]"},
		{`flip_left_right(transpose(decode_image(read_file(path), 0), [2, 0, 1]), 0.5)`, "", "tensor<uint8>[? ? ?]"},
	} {
		checkCompile(t, in, tc.src, tc.want, tc.typ)
	}
}

// TestToFloatPassesFloat32Through: to_float of a float32 tensor, which
// the checker lets through, gives the same values at run time.
func TestToFloatPassesFloat32Through(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{{Name: "f32", Type: sample.TensorOf(tensor.Float32, 1, 1, 2)}}}
	p, err := expression.Default().Compile(`to_float(f32)`, in, sample.Any)
	if err != nil {
		t.Fatal(err)
	}
	x := tensor.FromFloat32s([]float32{0.25, 7})
	x.Shape = []int{1, 1, 2}
	v, err := p.Run(nil, map[string]any{"f32": x})
	if err != nil {
		t.Fatal(err)
	}
	got := v.(*tensor.Tensor)
	if got.DType != tensor.Float32 || got.Float32()[0] != 0.25 || got.Float32()[1] != 7 {
		t.Errorf("got %s %v, want float32 [0.25 7]", got, got.Float32())
	}
}

// TestFusedCallErrorsPointAtTheDecode: a fused chain fails at run time
// with its caret on the decode_image the user wrote, where damaged bytes
// fail, not on the outer call the chain was fused into; an argument of the
// outer call that fails names it.
func TestFusedCallErrorsPointAtTheDecode(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{{Name: "b", Type: sample.TBytes}, {Name: "h", Type: sample.TAny}}}
	bad := map[string]any{"b": []byte("not an image"), "h": int64(8)}
	good := map[string]any{"b": gradientJPEG(t, 32, 24), "h": "eight"}
	for _, c := range []struct {
		src  string
		env  map[string]any
		want string
	}{
		{"decode_image(b, 3) | resize(8, 8)", bad, "decode_image: unknown image format (want jpeg or png) (1:1)\n | decode_image(b, 3) | resize(8, 8)\n | ^"},
		{"resize(decode_image(b, 3), 8, 8)", bad, "decode_image: unknown image format (want jpeg or png) (1:8)\n | resize(decode_image(b, 3), 8, 8)\n | .......^"},
		{"let x = 1; decode_image(b, 3) | resize(8, 8) | to_float()", bad, "decode_image: unknown image format (want jpeg or png) (1:12)\n | let x = 1; decode_image(b, 3) | resize(8, 8) | to_float()\n | ...........^"},
		{"decode_image(b, 3) | random_resized_crop(8, 8)", bad, "decode_image: unknown image format (want jpeg or png) (1:1)\n | decode_image(b, 3) | random_resized_crop(8, 8)\n | ^"},
		{"decode_image(b, 3) | resize(h, 8)", good, "resize: height and width must be integers, got string and int64 (1:1)\n | decode_image(b, 3) | resize(h, 8)\n | ^"},
		{"decode_image(b, 3) | random_resized_crop(h, 8)", good, "random_resized_crop: height and width must be integers, got string and int64 (1:1)\n | decode_image(b, 3) | random_resized_crop(h, 8)\n | ^"},
	} {
		p, err := expression.Default().Compile(c.src, in, sample.Any)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		if !strings.Contains(p.Disassemble(), "__decode_") {
			t.Fatalf("%s was not fused", c.src)
		}
		_, err = p.Run(nil, c.env)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.src, err, c.want)
		}
	}
}

// TestFusedCallsAreCheckedAsWritten: a chain fused into one call is type
// checked as the calls the user wrote, with their names and argument
// numbers. The fused calls' own checks skipped decode_image's first
// argument (decode_image(path, 3) | resize(...) passed validate) and
// numbered the outer call's arguments in the fused list ("argument 4");
// found by a new-user test.
func TestFusedCallsAreCheckedAsWritten(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{{Name: "b", Type: sample.TBytes}, {Name: "path", Type: sample.TString}}}
	for _, c := range []struct{ src, want string }{
		{`decode_image(path, 3) | resize(224, 224)`, "decode_image: argument 1 must be bytes, got string; to decode the file a path names, read it first: decode_image(read_file(path), …) (line 1, column 1 of the expression)"},
		{`decode_image(12, 3) | resize(224, 224)`, "decode_image: argument 1 must be bytes, got int64 (line 1, column 1 of the expression)"},
		{`decode_image(path, 3) | resize(224, 224) | to_float()`, "decode_image: argument 1 must be bytes, got string; to decode the file a path names, read it first: decode_image(read_file(path), …) (line 1, column 1 of the expression)"},
		{`decode_image(path, 3) | random_resized_crop(224, 224)`, "decode_image: argument 1 must be bytes, got string; to decode the file a path names, read it first: decode_image(read_file(path), …) (line 1, column 1 of the expression)"},
		{`decode_image(b, 2) | resize(224, 224)`, "decode_image: channels must be 0 (as stored), 1, 3 or 4, got 2 (line 1, column 1 of the expression)"},
		{`decode_image(b, 3) | resize(224, 2.5)`, "resize: argument 3 must be int64, got float64 (line 1, column 22 of the expression)"},
		{`decode_image(b, 3) | resize(224, 224, "cubic")`, `resize: unknown method "cubic" (want bilinear, nearest, area or bicubic) (line 1, column 22 of the expression)`},
		{`decode_image(b, 3) | random_resized_crop(224, 224, 0.5, 0.2)`, "random_resized_crop: scale range [0.5, 0.2] must satisfy 0 < min_scale <= max_scale <= 1 (line 1, column 22 of the expression)"},
		{`decode_image(b, 3) | random_resized_crop(224, "a")`, "random_resized_crop: argument 3 must be int64, got string (line 1, column 22 of the expression)"},
		// Each error at the call that is wrong, as written.
		{`resize(decode_image(b, 3), 224, 2.5)`, "resize: argument 3 must be int64, got float64 (line 1, column 1 of the expression)"},
		// A size divided out is a float, even a whole one: say why.
		{`resize(decode_image(b, 3), 224 / 2, 112)`, "resize: argument 2 must be int64, got float64 (a whole float such as 2.0, or a / of integers, which divides to a float even of 8 / 2: int(…) makes it whole) (line 1, column 1 of the expression)"},
		{`resize(decode_image(b, 3), int(224 / 2), 112)`, ""},
		{`to_float(resize(decode_image(b, 3), 224, 2.5))`, "resize: argument 3 must be int64, got float64 (line 1, column 10 of the expression)"},
		{`to_float(resize(decode_image(path, 3), 224, 224))`, "decode_image: argument 1 must be bytes, got string; to decode the file a path names, read it first: decode_image(read_file(path), …) (line 1, column 17 of the expression)"},
		// The chain's argument counts differ from compile to compile: a
		// fused check once kept the first one's (a panic, or a
		// bad method let through, by the order of the compiles).
		{`to_float(resize(decode_image(b, 3), 224, 224, 5))`, "resize: argument 4 must be string, got int64 (line 1, column 10 of the expression)"},
		{`decode_image(b, 3) | resize(224, 224) | to_float()`, ""},
		{`to_float(resize(decode_image(b, 3), 224, 224, "area"))`, ""},
		{`to_float(resize(decode_image(b, 3), 224, 224, 5))`, "resize: argument 4 must be string, got int64 (line 1, column 10 of the expression)"},
	} {
		_, err := expression.Default().Compile(c.src, in, sample.Any)
		if got := fmt.Sprint(err); c.want == "" && err != nil || c.want != "" && got != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.src, err, c.want)
		}
	}
}

// TestScaleRangeFromFieldsIsChecked: a scale range read from fields,
// which validate cannot see, is checked when the call runs, fused or not
// (min_scale 0.9 and max_scale 0.1 ran).
func TestScaleRangeFromFieldsIsChecked(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{{Name: "b", Type: sample.TBytes}, {Name: "lo", Type: sample.TFloat}, {Name: "hi", Type: sample.TFloat}}}
	img := gradientJPEG(t, 32, 24)
	for _, c := range []struct {
		src    string
		lo, hi float64
		want   string
	}{
		{"decode_image(b, 3) | random_resized_crop(8, 8, lo, hi)", 0.9, 0.1, "random_resized_crop: scale range [0.9, 0.1] must satisfy 0 < min_scale <= max_scale <= 1 (1:1)\n | decode_image(b, 3) | random_resized_crop(8, 8, lo, hi)\n | ^"},
		{"random_resized_crop(decode_image(b, 3, 100000), 8, 8, lo, hi)", 0, 0.5, "random_resized_crop: scale range [0, 0.5] must satisfy 0 < min_scale <= max_scale <= 1 (1:1)\n | random_resized_crop(decode_image(b, 3, 100000), 8, 8, lo, hi)\n | ^"},
		{"random_resized_crop(decode_image(b, 3, 100000), 8, 8, lo, hi)", 0.5, 1.5, "random_resized_crop: scale range [0.5, 1.5] must satisfy 0 < min_scale <= max_scale <= 1 (1:1)\n | random_resized_crop(decode_image(b, 3, 100000), 8, 8, lo, hi)\n | ^"},
		{"decode_image(b, 3) | random_resized_crop(8, 8, lo, hi)", 0.25, 0.5, ""},
	} {
		p, err := expression.Default().Compile(c.src, in, sample.Any)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		_, err = p.Run(nil, map[string]any{"b": img, "lo": c.lo, "hi": c.hi})
		if got := fmt.Sprint(err); c.want == "" && err != nil || c.want != "" && got != c.want {
			t.Errorf("%s with [%v, %v]:\n got %v\nwant %s", c.src, c.lo, c.hi, err, c.want)
		}
	}
}

// TestImageFunctionsCheckAtRunTime: what validate cannot see in a field of
// unknown shape or a computed argument is refused as the sample runs: a
// channels-first image (resize, crops, flips) and a flip probability
// outside [0, 1] (p from -20 to 20 ran without a word).
func TestImageFunctionsCheckAtRunTime(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{{Name: "x", Type: sample.Type{Kind: sample.Tensor}}, {Name: "p", Type: sample.TFloat},
		{Name: "m", Type: sample.TAny}, {Name: "b", Type: sample.TBytes}}}
	chw := tensor.New(tensor.Uint8, 3, 8, 10)
	hwc := tensor.New(tensor.Uint8, 8, 10, 3)
	jpg := gradientJPEG(t, 10, 8)
	const cf = "argument 1 looks channels-first (uint8[3 8 10]): image functions take HWC [H, W, C]; apply them before transpose"
	for _, tc := range []struct {
		src  string
		x    *tensor.Tensor
		p    float64
		m    any    // a method known only at run time
		want string // the error; "" for none
	}{
		// A method of another type was taken for bilinear.
		{`resize(x, 4, 4, m)`, hwc, 0, int64(3), `method must be a string, got int64`},
		{`resize(x, 4, 4, m)`, hwc, 0, nil, `method must be a string, got null`},
		{`resize(decode_image(b, 3), 4, 4, m)`, hwc, 0, []any{"nearest"}, `method must be a string, got list`},
		{`resize(x, 4, 4, m)`, hwc, 0, "lanczos", `resize method "lanczos" (want bilinear, nearest, area or bicubic)`},
		{`resize(x, 4, 4, m)`, hwc, 0, "nearest", ""},
		{`resize(decode_image(b, 3), 4, 4, m)`, hwc, 0, "area", ""},
		{`resize(x, 4, 4)`, chw, 0, nil, cf},
		{`center_crop(x, 2, 2)`, chw, 0, nil, cf},
		{`random_crop(x, 2, 2)`, chw, 0, nil, cf},
		{`random_resized_crop(x, 4, 4)`, chw, 0, nil, cf},
		{`flip_left_right(x, p)`, chw, 0.5, nil, cf},
		{`flip_left_right(x, p)`, hwc, -20, nil, "probability -20 is outside [0, 1]"},
		{`flip_left_right(x, p)`, hwc, 1.5, nil, "probability 1.5 is outside [0, 1]"},
		{`flip_left_right(x, p)`, hwc, math.NaN(), nil, "probability NaN is outside [0, 1]"},
		{`flip_left_right(x, p)`, hwc, 1, nil, ""},
		{`resize(x, 4, 4)`, hwc, 0, nil, ""},
		// A mean or std computed at run time is checked as a constant one
		// is at validate time: a NaN std wrote NaN images, and exit 0.
		{`normalize(to_float(x), 0.5, p)`, hwc, math.NaN(), nil, "normalize: std is NaN (not a number)"},
		{`normalize(to_float(x), [0.5, 0.5, 0.5], [p, 1, 1])`, hwc, math.Inf(1), nil, "normalize: std +Inf is beyond float32's range (±3.4e38)"},
		{`normalize(to_float(x), [p, 0.5, 0.5], 1)`, hwc, math.NaN(), nil, "normalize: mean is NaN (not a number)"},
		{`normalize(to_float(x), p, 1)`, hwc, 1e39, nil, "normalize: mean 1e+39 is beyond float32's range (±3.4e38)"},
		{`normalize(to_float(x), 0.5, p)`, hwc, 1e-50, nil, "normalize: std 1e-50 is too small for float32"},
		{`normalize(to_float(x), 0.5, p)`, hwc, 0.25, nil, ""},
	} {
		p, err := expression.Default().Compile(tc.src, in, sample.Any)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		_, err = p.Run(nil, map[string]any{"x": tc.x, "p": tc.p, "m": tc.m, "b": jpg, expression.CtxVar: &expression.RunCtx{Seed: 1}})
		got := ""
		if err != nil {
			got = err.Error()
		}
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s with x %s, p %v, m %#v: error %q, want %q", tc.src, tc.x, tc.p, tc.m, got, tc.want)
		}
	}
}
