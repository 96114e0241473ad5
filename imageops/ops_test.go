package imageops

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/piperun/piperun/tensor"
)

// ramp builds an h×w×c uint8 image whose value encodes its position.
func ramp(h, w, c int) *tensor.Tensor {
	t := tensor.New(tensor.Uint8, h, w, c)
	for i := range t.Data {
		t.Data[i] = uint8(i * 7)
	}
	return t
}

func TestResizeProperties(t *testing.T) {
	for _, method := range []string{Bilinear, Nearest, Area, Bicubic, ""} {
		for _, c := range []int{1, 2, 3, 4} {
			// A constant image stays constant at any size, uint8 and float.
			img := tensor.New(tensor.Uint8, 37, 53, c)
			for i := range img.Data {
				img.Data[i] = 200
			}
			f, _ := ToFloat(img)
			for _, sz := range [][2]int{{224, 224}, {7, 5}, {37, 20}, {100, 53}, {1, 1}} {
				out, err := Resize(img, sz[0], sz[1], method)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(out.Shape) != fmt.Sprint([]int{sz[0], sz[1], c}) {
					t.Fatalf("%s: shape %v", method, out.Shape)
				}
				for _, v := range out.Data {
					if v != 200 {
						t.Fatalf("%s c=%d %v: constant 200 became %d", method, c, sz, v)
					}
				}
				fo, err := Resize(f, sz[0], sz[1], method)
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range fo.Float32() {
					if math.Abs(float64(v)-200.0/255) > 1e-5 {
						t.Fatalf("%s c=%d %v float: constant became %v", method, c, sz, v)
					}
				}
			}
		}
	}
	// float32 and uint8 resizes agree to rounding.
	img := ramp(61, 47, 3)
	u, _ := Resize(img, 20, 31, Bilinear)
	f, _ := ToFloat(img)
	fr, _ := Resize(f, 20, 31, Bilinear)
	for i, v := range fr.Float32() {
		if d := math.Abs(float64(v)*255 - float64(u.Data[i])); d > 1.0001 {
			t.Fatalf("float and uint8 resize differ by %.2f at %d", d, i)
		}
	}
	// Same size copies; errors are named.
	same, _ := Resize(img, 61, 47, Bicubic)
	if !tensor.Equal(same, img) {
		t.Error("resize to the same size changed the image")
	}
	if _, err := Resize(img, 0, 5, ""); !errors.Is(err, ErrArgument) {
		t.Errorf("zero size: %v", err)
	}
	if _, err := Resize(img, 5, 5, "lanczos"); !errors.Is(err, ErrArgument) {
		t.Errorf("unknown method: %v", err)
	}
	if _, err := Resize(tensor.New(tensor.Int64, 2, 2, 1), 5, 5, ""); !errors.Is(err, ErrArgument) {
		t.Errorf("int64 image: %v", err)
	}
}

func TestCrops(t *testing.T) {
	img := ramp(10, 8, 3)
	c, err := Crop(img, 2, 3, 4, 5)
	if err != nil {
		t.Fatal(err)
	}
	for y := 0; y < 4; y++ {
		for x := 0; x < 5; x++ {
			for ch := 0; ch < 3; ch++ {
				if c.Data[(y*5+x)*3+ch] != img.Data[((y+2)*8+x+3)*3+ch] {
					t.Fatalf("crop pixel %d,%d wrong", y, x)
				}
			}
		}
	}
	cc, _ := CenterCrop(img, 4, 4)
	want, _ := Crop(img, 3, 2, 4, 4)
	if !tensor.Equal(cc, want) {
		t.Error("center crop is not at (3, 2)")
	}
	for _, bad := range [][4]int{{-1, 0, 2, 2}, {0, 0, 11, 2}, {0, 7, 2, 2}, {0, 0, 0, 2}} {
		if _, err := Crop(img, bad[0], bad[1], bad[2], bad[3]); !errors.Is(err, ErrArgument) {
			t.Errorf("crop %v: %v, want ErrArgument", bad, err)
		}
	}
	rng := rand.New(rand.NewSource(1))
	// Crops never pad, and say so in the sizes asked for (center_crop
	// named a window at y=-1 the user never asked for).
	for _, tc := range []struct {
		name string
		crop func() (*tensor.Tensor, error)
		want string
	}{
		{"center too tall", func() (*tensor.Tensor, error) { return CenterCrop(img, 11, 2) },
			"imageops: center_crop: invalid argument: a 11×2 (height×width) crop does not fit the 10×8 image"},
		{"center too wide", func() (*tensor.Tensor, error) { return CenterCrop(img, 4, 9) },
			"imageops: center_crop: invalid argument: a 4×9 (height×width) crop does not fit the 10×8 image"},
		// "A 0×2 crop does not fit" a 10×8 image read as a riddle.
		{"center empty", func() (*tensor.Tensor, error) { return CenterCrop(img, 0, 2) },
			"imageops: center_crop: invalid argument: a 0×2 (height×width) crop: sizes must be positive"},
		{"random negative", func() (*tensor.Tensor, error) { return RandomCrop(img, 4, -1, rng) },
			"imageops: random_crop: invalid argument: a 4×-1 (height×width) crop: sizes must be positive"},
		{"resize empty", func() (*tensor.Tensor, error) { return Resize(img, 0, 10, "") },
			"imageops: resize: invalid argument: a 0×10 (height×width) resize: sizes must be positive"},
		{"random too tall", func() (*tensor.Tensor, error) { return RandomCrop(img, 11, 2, rng) },
			"imageops: random_crop: invalid argument: a 11×2 (height×width) crop does not fit the 10×8 image"},
	} {
		if _, err := tc.crop(); !errors.Is(err, ErrArgument) || err.Error() != tc.want {
			t.Errorf("%s: %v\nwant %s", tc.name, err, tc.want)
		}
	}
	seen := map[[2]int]bool{}
	for i := 0; i < 500; i++ {
		r, err := RandomCrop(img, 8, 6, rng)
		if err != nil {
			t.Fatal(err)
		}
		// Recover the offset from the first pixel's value.
		for y := 0; y <= 2; y++ {
			for x := 0; x <= 2; x++ {
				if s, _ := Crop(img, y, x, 8, 6); tensor.Equal(s, r) {
					seen[[2]int{y, x}] = true
				}
			}
		}
	}
	if len(seen) != 9 {
		t.Errorf("random crop reached %d of 9 offsets", len(seen))
	}
}

// fixedRNG replays values, to steer RandomResizedCropWindow.
type fixedRNG struct {
	v []float64
	i int
}

func (f *fixedRNG) Float64() float64 { v := f.v[f.i%len(f.v)]; f.i++; return v }

func TestRandomResizedCropWindow(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	var areaSum float64
	const n = 20000
	for i := 0; i < n; i++ {
		r := RandomResizedCropWindow(375, 500, 0, 0, rng)
		if r.H <= 0 || r.W <= 0 || r.Y < 0 || r.X < 0 || r.Y+r.H > 375 || r.X+r.W > 500 {
			t.Fatalf("window %+v outside 375x500", r)
		}
		ratio := float64(r.W) / float64(r.H)
		area := float64(r.W*r.H) / (375 * 500)
		// Rounding w and h to integers bends the bounds slightly.
		if ratio < 0.75*0.97 || ratio > 4.0/3*1.03 || area < 0.08*0.95 || area > 1.0001 {
			t.Fatalf("window %+v: ratio %.3f area %.3f out of range", r, ratio, area)
		}
		areaSum += area
	}
	// Accepted areas are uniform in [0.08, 1] cut by the image bounds;
	// torchvision's sampler measures a mean near 0.4 on a 4:3 image.
	if m := areaSum / n; m < 0.35 || m > 0.5 {
		t.Errorf("mean area fraction %.3f, want about 0.4", m)
	}
	// Exactly torchvision's arithmetic: scale 0.5 → target 93750, ratio
	// e^0 = 1 → w = h = round(306.19) = 306; offsets floor(u * (n+1)).
	r := RandomResizedCropWindow(375, 500, 0, 0, &fixedRNG{v: []float64{(0.5 - 0.08) / 0.92, 0.5, 0.25, 0.5}})
	if want := (Rect{Y: 17, X: 97, H: 306, W: 306}); r != want {
		t.Errorf("window %+v, want %+v", r, want)
	}
	// Every attempt too big (scale 1, extreme ratio) falls back to the
	// central crop clamped to the allowed ratio.
	r = RandomResizedCropWindow(100, 1000, 1, 1, &fixedRNG{v: []float64{0.999}})
	if want := (Rect{Y: 0, X: 433, H: 100, W: 133}); r != want {
		t.Errorf("fallback window %+v, want %+v", r, want)
	}
	img := ramp(375, 500, 3)
	out, err := RandomResizedCrop(img, 224, 224, 0, 0, rng)
	if err != nil || fmt.Sprint(out.Shape) != "[224 224 3]" {
		t.Fatalf("RandomResizedCrop: %v %v", out, err)
	}
}

func TestFlipToFloatNormalizeTranspose(t *testing.T) {
	img := ramp(3, 4, 3)
	f, _ := FlipLeftRight(img)
	for y := 0; y < 3; y++ {
		for x := 0; x < 4; x++ {
			for c := 0; c < 3; c++ {
				if f.Data[(y*4+x)*3+c] != img.Data[(y*4+3-x)*3+c] {
					t.Fatal("flip wrong")
				}
			}
		}
	}
	ff, _ := FlipLeftRight(f)
	if !tensor.Equal(ff, img) {
		t.Error("flip twice is not the identity")
	}
	fl, _ := ToFloat(img)
	f2, _ := FlipLeftRight(fl)
	f3, _ := ToFloat(f)
	if !tensor.Equal(f2, f3) {
		t.Error("float flip differs from uint8 flip")
	}
	for i, v := range fl.Float32() {
		if v != float32(img.Data[i])/255 {
			t.Fatal("to_float is not x/255")
		}
	}
	n, err := Normalize(fl, []float32{0.485, 0.456, 0.406}, []float32{0.229, 0.224, 0.225})
	if err != nil {
		t.Fatal(err)
	}
	mean := []float32{0.485, 0.456, 0.406}
	std := []float32{0.229, 0.224, 0.225}
	for i, v := range n.Float32() {
		want := (fl.Float32()[i] - mean[i%3]) / std[i%3]
		if math.Abs(float64(v-want)) > 1e-5 {
			t.Fatalf("normalize %d: %v want %v", i, v, want)
		}
	}
	s, _ := Normalize(fl, []float32{0.5}, []float32{0.5})
	if v := s.Float32()[5]; math.Abs(float64(v-(fl.Float32()[5]-0.5)/0.5)) > 1e-6 {
		t.Errorf("scalar normalize: %v", v)
	}
	if _, err := Normalize(img, []float32{0}, []float32{1}); !errors.Is(err, ErrArgument) {
		t.Errorf("normalize uint8: %v", err)
	}
	if _, err := Normalize(fl, []float32{0, 0}, []float32{1}); !errors.Is(err, ErrArgument) {
		t.Errorf("normalize 2 means for 3 channels: %v", err)
	}
	for _, x := range []*tensor.Tensor{img, fl} {
		chw, err := Transpose(x, []int{2, 0, 1})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(chw.Shape) != "[3 3 4]" {
			t.Fatalf("chw shape %v", chw.Shape)
		}
		es := x.DType.Size()
		for c := 0; c < 3; c++ {
			for i := 0; i < 12; i++ {
				if string(chw.Data[(c*12+i)*es:(c*12+i+1)*es]) != string(x.Data[(i*3+c)*es:(i*3+c+1)*es]) {
					t.Fatalf("%s: chw[%d][%d] wrong", x.DType, c, i)
				}
			}
		}
		back, _ := Transpose(chw, []int{1, 2, 0})
		if !tensor.Equal(back, x) {
			t.Errorf("%s: HWC→CHW→HWC is not the identity", x.DType)
		}
		// The general path agrees with the fast one.
		wch, _ := Transpose(x, []int{1, 2, 0})
		wch2, _ := Transpose(wch, []int{2, 0, 1})
		if !tensor.Equal(wch2, x) {
			t.Errorf("%s: general transpose round trip failed", x.DType)
		}
	}
	if _, err := Transpose(img, []int{0, 0, 1}); !errors.Is(err, ErrArgument) {
		t.Errorf("bad perm: %v", err)
	}
	c, _ := Cast(fl, tensor.Uint8)
	if c.DType != tensor.Uint8 || c.Data[3] != 0 {
		t.Errorf("cast to uint8: %v %v", c, c.Data[:4])
	}
}

func TestPool(t *testing.T) {
	var p Pool
	b := p.Get(5000)
	if len(b) != 5000 || cap(b) != 8192 {
		t.Fatalf("Get(5000): len %d cap %d", len(b), cap(b))
	}
	p.Put(b)
	p.Put(make([]byte, 5000)) // not from the pool: ignored
	if b := p.Get(0); b != nil {
		t.Error("Get(0) is not nil")
	}
	// An empty bucket takes from up to poolReach buckets above it, the
	// nearest first; beyond that it allocates.
	big, bigger, far := p.Get(1<<16), p.Get(1<<17), p.Get(1<<20)
	p.Put(bigger)
	p.Put(big)
	p.Put(far)
	for _, tc := range []struct{ n, want int }{{10000, 1 << 16}, {10000, 1 << 14}, {40000, 1 << 17}, {40000, 1 << 16}} {
		if b := p.Get(tc.n); cap(b) != tc.want || len(b) != tc.n {
			t.Errorf("Get(%d) with 64 and 128 KiB idle: cap %d len %d, want cap %d", tc.n, cap(b), len(b), tc.want)
		}
	}
	// Idle buffers outlive collections (a sync.Pool empties within two);
	// only two agings with no use drop them.
	runtime.GC()
	runtime.GC()
	if b := p.Get(1 << 20); &b[0] != &far[0] {
		t.Error("an idle buffer did not survive two collections")
	}
	p.Put(far)
	p.mu.Lock()
	p.age()
	p.mu.Unlock()
	if b := p.Get(1 << 20); &b[0] != &far[0] {
		t.Error("a buffer idle through one aging was dropped")
	}
	p.Put(far)
	p.mu.Lock()
	p.age()
	p.age()
	idle := p.idle
	p.mu.Unlock()
	if b := p.Get(1 << 20); &b[0] == &far[0] || idle != 0 {
		t.Errorf("two agings kept a buffer (%d idle bytes)", idle)
	}
	// Beyond poolIdleLimit idle bytes in all the pools sharing the limit,
	// Put leaves buffers to the collector.
	var all atomic.Int64
	q1, q2 := Pool{all: &all}, Pool{all: &all}
	const size = 4 << 20
	for range poolIdleLimit / size {
		q1.Put(make([]byte, size))
		q2.Put(make([]byte, size))
	}
	if q1.idle+q2.idle != poolIdleLimit || all.Load() != poolIdleLimit || q1.idle != poolIdleLimit/2 {
		t.Errorf("idle %d + %d bytes (%d counted) after putting twice the limit, want %d in all", q1.idle, q2.idle, all.Load(), poolIdleLimit)
	}
	q1.Get(size)
	if all.Load() != poolIdleLimit-size {
		t.Errorf("%d idle bytes counted after a Get, want %d", all.Load(), poolIdleLimit-size)
	}
	_, photos := photos(t)
	// Steady state: the full-size frame and the intermediate come from the
	// pool, so one decode+resize allocates little beyond its result.
	DecodeResize(photos[0], 3, 224, 224, Bilinear, DecodeOptions{})
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := DecodeResize(photos[0], 3, 224, 224, Bilinear, DecodeOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("DecodeResize: %.0f allocations per image", allocs)
	if allocs > 40 {
		t.Errorf("DecodeResize: %.0f allocations per image, want <= 40", allocs)
	}
}

// TestResizeExtremeShrink exercises the fallback from the packed pass when
// 13-bit weights cannot sum exactly (thousands of taps per output).
func TestResizeExtremeShrink(t *testing.T) {
	img := tensor.New(tensor.Uint8, 2, 9000, 3)
	for i := range img.Data {
		img.Data[i] = uint8(100 + i%3)
	}
	for _, m := range []string{Bilinear, Area} {
		out, err := Resize(img, 1, 1, m)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(out.Data) != "[100 101 102]" {
			t.Errorf("%s: %v, want [100 101 102]", m, out.Data)
		}
	}
}

// TestResizeManyTapsStayExact: a shrink of hundreds of taps per output
// stays within rounding of the float32 resize of the same image (its
// weights unrounded), for every method, on both axes: one white row or
// column among hundreds of black ones, and a column of noise. The 13-bit
// weights gave the rounding of every tap to the largest one: one white row
// in 1000 came out as 6 where its share is 0.255 (a review; PIL's box
// gives 0), and the noise up to 3 levels off.
func TestResizeManyTapsStayExact(t *testing.T) {
	for _, n := range []int{300, 500, 1000, 4000} {
		row := tensor.New(tensor.Uint8, n, 1, 1) // one white row on top
		row.Data[0] = 255
		col := tensor.New(tensor.Uint8, 1, n, 1) // one white column on the left
		col.Data[0] = 255
		noise := tensor.New(tensor.Uint8, n, 1, 1)
		for i := range noise.Data {
			noise.Data[i] = uint8((i*7919 + i*i*31) % 251)
		}
		for _, m := range []string{Bilinear, Area, Bicubic} {
			for name, img := range map[string]*tensor.Tensor{"white row": row, "white column": col, "noise": noise} {
				out, err := Resize(img, 1, 1, m)
				if err != nil {
					t.Fatal(err)
				}
				f, _ := ToFloat(img)
				ref, err := Resize(f, 1, 1, m)
				if err != nil {
					t.Fatal(err)
				}
				if want := float64(ref.Float32()[0]) * 255; math.Abs(float64(out.Data[0])-want) >= 1 {
					t.Errorf("%d pixels, %s, %s: %d, want %.3f to rounding", n, m, name, out.Data[0], want)
				}
			}
		}
	}
}

// TestFusedScaleStaysAccurate: the fused decode+resize the expression
// functions use (ScaleHintFor: DCT scaling to ScaleHintFactor × the
// target, none for nearest and area) stays within a mean absolute
// difference of 1.5 levels of decoding at full resolution, over the
// shared photos, at every target size and method; nearest and area are
// exact. Found by the tester: with a factor of 2 and a hint for every
// method, 64×64 and 32×32 targets differed by 1.3–2.8 levels (area) and
// nearest by 9.
func TestFusedScaleStaysAccurate(t *testing.T) {
	dir := sharedData(t, "photos/imagenet")
	files, _ := filepath.Glob(filepath.Join(dir, "*.JPEG"))
	if len(files) == 0 {
		t.Fatalf("no *.JPEG in %s", dir)
	}
	for _, tc := range []struct {
		size   int
		method string
		max    float64
	}{
		{224, Bilinear, 0.05}, {128, Bilinear, 0.2}, {64, Bilinear, 1}, {32, Bilinear, 1},
		{64, Bicubic, 1}, {64, Area, 0}, {32, Area, 0}, {64, Nearest, 0},
	} {
		var sum float64
		for _, f := range files {
			d, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			full, err := DecodeResize(d, 3, tc.size, tc.size, tc.method, DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			fused, err := DecodeResize(d, 3, tc.size, tc.size, tc.method, DecodeOptions{ScaleHint: ScaleHintFor(tc.size, tc.size, tc.method)})
			if err != nil {
				t.Fatal(err)
			}
			var s float64
			for i := range full.Data {
				s += math.Abs(float64(full.Data[i]) - float64(fused.Data[i]))
			}
			sum += s / float64(len(full.Data))
		}
		if mean := sum / float64(len(files)); mean > tc.max {
			t.Errorf("%d×%d %s: fused differs by a mean %.3f levels over %d photos, want <= %g", tc.size, tc.size, tc.method, mean, len(files), tc.max)
		} else {
			t.Logf("%d×%d %s: mean abs difference %.3f levels over %d photos", tc.size, tc.size, tc.method, mean, len(files))
		}
	}
}

// TestFloatTableIsBitExact: converting through FloatTable's tables gives
// exactly the float32s of ToFloat, and of ToFloat then Normalize, for every
// level in every channel; the batch stage relies on it when it does a
// deferred to_float.
func TestFloatTableIsBitExact(t *testing.T) {
	img := tensor.New(tensor.Uint8, 256, 1, 3)
	for i := range img.Data {
		img.Data[i] = uint8(i / 3)
	}
	gray := tensor.New(tensor.Uint8, 16, 16, 1)
	for i := range gray.Data {
		gray.Data[i] = uint8(i)
	}
	for _, tc := range []struct {
		name      string
		img       *tensor.Tensor
		mean, std []float32
		tables    int
	}{
		{"to_float", img, nil, nil, 1},
		{"imagenet", img, []float32{0.485, 0.456, 0.406}, []float32{0.229, 0.224, 0.225}, 3},
		{"scalars", img, []float32{0.5}, []float32{0.25}, 1},
		{"mean list, scalar std", img, []float32{0.1, 0.2, 0.3}, []float32{0.7}, 3},
		{"gray", gray, []float32{0.5}, []float32{0.5}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := ToFloat(tc.img)
			if err != nil {
				t.Fatal(err)
			}
			if tc.mean != nil {
				if want, err = Normalize(want, tc.mean, tc.std); err != nil {
					t.Fatal(err)
				}
			}
			lut, err := FloatTable(tc.mean, tc.std, tc.img.Shape[2])
			if err != nil {
				t.Fatal(err)
			}
			if lut.Channels() != tc.tables {
				t.Errorf("%d tables, want %d", lut.Channels(), tc.tables)
			}
			got := make([]float32, tc.img.Len())
			lut.Into(got, tc.img)
			for i, w := range want.Float32() {
				if math.Float32bits(got[i]) != math.Float32bits(w) {
					t.Fatalf("element %d (level %d): %v, want %v", i, tc.img.Data[i], got[i], w)
				}
			}
		})
	}
}

func TestFloatTableRejects(t *testing.T) {
	for _, tc := range []struct {
		mean, std []float32
		c         int
		want      string
	}{
		{[]float32{0.5, 0.5, 0.5}, []float32{0.2}, 1, "mean has 3 and std 1 values, want 1 for the image's 1 channel"},
		{[]float32{0.5, 0.5}, []float32{0.2}, 3, "mean has 2 and std 1 values, want 1 or 3 for the image's 3 channels"},
		{[]float32{0.5}, []float32{0}, 3, "std is 0 for channel 0"},
		{[]float32{}, []float32{1}, 3, "mean and std need a value each"},
	} {
		_, err := FloatTable(tc.mean, tc.std, tc.c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FloatTable(%v, %v, %d) = %v, want %q", tc.mean, tc.std, tc.c, err, tc.want)
		}
	}
}

// TestTransposeKeepsBooleans: transposed batched booleans are still
// booleans, written as such by write_tfrecord.
func TestTransposeKeepsBooleans(t *testing.T) {
	b := &tensor.Tensor{DType: tensor.Uint8, Shape: []int{2, 3}, Data: []byte{1, 0, 1, 0, 0, 1}, Booleans: true}
	out, err := Transpose(b, []int{1, 0})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Booleans || fmt.Sprint(out.Shape, out.Data) != "[3 2] [1 0 0 0 1 1]" {
		t.Errorf("transpose: %v %v, Booleans %v", out.Shape, out.Data, out.Booleans)
	}
}
