package imageops

import (
	"fmt"
	"math"

	"github.com/piperun/piperun/tensor"
)

// RNG is the randomness the random functions draw from. *math/rand.Rand and
// *math/rand/v2.Rand satisfy it; the engine seeds one per (seed, epoch,
// sample, stage, call site) so results do not depend on scheduling.
type RNG interface {
	// Float64 returns a number in [0, 1).
	Float64() float64
}

// Default RandomResizedCrop parameters, torchvision's and Inception's.
const (
	DefaultMinScale = 0.08
	DefaultMaxScale = 1.0
	minRatio        = 3.0 / 4.0
	maxRatio        = 4.0 / 3.0
)

// Crop returns the window of h×w pixels at row y, column x of an HWC image.
func Crop(img *tensor.Tensor, y, x, h, w int) (*tensor.Tensor, error) {
	out, err := crop(img, Rect{Y: y, X: x, H: h, W: w})
	if err != nil {
		return nil, fmt.Errorf("imageops: crop: %w", err)
	}
	return out, nil
}

func crop(img *tensor.Tensor, r Rect) (*tensor.Tensor, error) {
	ih, iw, c, err := checkImage(img)
	if err != nil {
		return nil, err
	}
	if err := checkWindow(&r, ih, iw); err != nil {
		return nil, err
	}
	es := img.DType.Size()
	data := cropBytes(img.Data, ih, iw, c*es, r, makeBytes)
	return &tensor.Tensor{DType: img.DType, Shape: []int{r.H, r.W, c}, Data: data}, nil
}

// CenterCrop returns the central h×w window, offset (H-h)/2, (W-w)/2 rounded
// down like tf.image.central_crop. The image must be at least h×w.
func CenterCrop(img *tensor.Tensor, h, w int) (*tensor.Tensor, error) {
	ih, iw, _, err := checkImage(img)
	if err != nil {
		return nil, fmt.Errorf("imageops: center_crop: %w", err)
	}
	if err := fits(h, w, ih, iw); err != nil {
		// Said before the window: a window of negative offsets, which
		// the user never asked for, was the error (a tester).
		return nil, fmt.Errorf("imageops: center_crop: %w", err)
	}
	out, err := crop(img, Rect{Y: (ih - h) / 2, X: (iw - w) / 2, H: h, W: w})
	if err != nil {
		return nil, fmt.Errorf("imageops: center_crop: %w", err)
	}
	return out, nil
}

// fits checks that an h×w crop fits an ih×iw image; crops never pad.
func fits(h, w, ih, iw int) error {
	if h <= 0 || w <= 0 {
		return fmt.Errorf("%w: a %d×%d (height×width) crop: sizes must be positive", ErrArgument, h, w)
	}
	if h > ih || w > iw {
		return fmt.Errorf("%w: a %d×%d (height×width) crop does not fit the %d×%d image", ErrArgument, h, w, ih, iw)
	}
	return nil
}

// randInt returns a uniform integer in [0, n).
func randInt(rng RNG, n int) int {
	return min(int(rng.Float64()*float64(n)), n-1)
}

// RandomCrop returns an h×w window at a uniformly random position.
func RandomCrop(img *tensor.Tensor, h, w int, rng RNG) (*tensor.Tensor, error) {
	ih, iw, _, err := checkImage(img)
	if err != nil {
		return nil, fmt.Errorf("imageops: random_crop: %w", err)
	}
	if err := fits(h, w, ih, iw); err != nil {
		return nil, fmt.Errorf("imageops: random_crop: %w", err)
	}
	out, err := crop(img, Rect{Y: randInt(rng, ih-h+1), X: randInt(rng, iw-w+1), H: h, W: w})
	if err != nil {
		return nil, fmt.Errorf("imageops: random_crop: %w", err)
	}
	return out, nil
}

// RandomResizedCropWindow picks the window torchvision's RandomResizedCrop
// (Inception's augmentation) would crop from an srcH×srcW image: area a
// uniform fraction in [minScale, maxScale] of the image, aspect ratio
// log-uniform in [3/4, 4/3], up to 10 attempts, then the largest central
// window of allowed aspect ratio. minScale and maxScale of 0 take the
// defaults 0.08 and 1. A caller can pass the window to Decode as
// DecodeOptions.Crop to decode only what it needs.
func RandomResizedCropWindow(srcH, srcW int, minScale, maxScale float64, rng RNG) Rect {
	if minScale <= 0 {
		minScale = DefaultMinScale
	}
	if maxScale <= 0 {
		maxScale = DefaultMaxScale
	}
	area := float64(srcH) * float64(srcW)
	logLo, logHi := math.Log(minRatio), math.Log(maxRatio)
	for attempt := 0; attempt < 10; attempt++ {
		target := area * (minScale + (maxScale-minScale)*rng.Float64())
		ratio := math.Exp(logLo + (logHi-logLo)*rng.Float64())
		w := int(math.RoundToEven(math.Sqrt(target * ratio)))
		h := int(math.RoundToEven(math.Sqrt(target / ratio)))
		if w > 0 && h > 0 && w <= srcW && h <= srcH {
			y := randInt(rng, srcH-h+1)
			x := randInt(rng, srcW-w+1)
			return Rect{Y: y, X: x, H: h, W: w}
		}
	}
	in := float64(srcW) / float64(srcH)
	w, h := srcW, srcH
	switch {
	case in < minRatio:
		h = int(math.RoundToEven(float64(w) / minRatio))
	case in > maxRatio:
		w = int(math.RoundToEven(float64(h) * maxRatio))
	}
	return Rect{Y: (srcH - h) / 2, X: (srcW - w) / 2, H: h, W: w}
}

// RandomResizedCrop crops a RandomResizedCropWindow and resizes it to h×w
// with antialiased bilinear resampling.
func RandomResizedCrop(img *tensor.Tensor, h, w int, minScale, maxScale float64, rng RNG) (*tensor.Tensor, error) {
	ih, iw, _, err := checkImage(img)
	if err != nil {
		return nil, fmt.Errorf("imageops: random_resized_crop: %w", err)
	}
	r := RandomResizedCropWindow(ih, iw, minScale, maxScale, rng)
	c, err := crop(img, r)
	if err != nil {
		return nil, fmt.Errorf("imageops: random_resized_crop: %w", err)
	}
	out, err := resize(c, h, w, Bilinear, nil)
	if err != nil {
		return nil, fmt.Errorf("imageops: random_resized_crop: %w", err)
	}
	return out, nil
}

// FlipLeftRight mirrors an HWC image of any dtype horizontally.
func FlipLeftRight(img *tensor.Tensor) (*tensor.Tensor, error) {
	if img == nil || len(img.Shape) != 3 {
		return nil, fmt.Errorf("imageops: flip_left_right: %w: want an HWC image of rank 3, got %v", ErrArgument, shapeOf(img))
	}
	h, w, c := img.Shape[0], img.Shape[1], img.Shape[2]
	px := c * img.DType.Size()
	if len(img.Data) < h*w*px {
		return nil, fmt.Errorf("imageops: flip_left_right: %w: data too short for %v", ErrArgument, img.Shape)
	}
	out := tensor.Alloc(img.DType, h, w, c)
	row := w * px
	for y := 0; y < h; y++ {
		s := img.Data[y*row : (y+1)*row]
		d := out.Data[y*row : (y+1)*row]
		if px == 3 {
			for x := 0; x < w; x++ {
				q := s[(w-1-x)*3 : (w-x)*3 : (w-x)*3]
				p := d[x*3 : x*3+3 : x*3+3]
				p[0], p[1], p[2] = q[0], q[1], q[2]
			}
			continue
		}
		for x := 0; x < w; x++ {
			copy(d[x*px:(x+1)*px], s[(w-1-x)*px:(w-x)*px])
		}
	}
	return out, nil
}

// ToFloat converts a uint8 image to float32 in [0, 1] (divides by 255). A
// float32 input is returned as a copy, so the op is idempotent in a chain.
func ToFloat(img *tensor.Tensor) (*tensor.Tensor, error) {
	if img == nil {
		return nil, fmt.Errorf("imageops: to_float: %w: nil tensor", ErrArgument)
	}
	switch img.DType {
	case tensor.Float32:
		return img.Clone(), nil
	case tensor.Uint8:
	default:
		return nil, fmt.Errorf("imageops: to_float: %w: want uint8, got %s", ErrArgument, img.DType)
	}
	out := tensor.Alloc(tensor.Float32, img.Shape...)
	dst := out.Float32()
	src := img.Data[:len(dst)]
	dst = dst[:len(src)] // lets the compiler drop the bounds check below
	// A table turns the divide into a load; it also gives the exact same
	// float for a level everywhere.
	for i, v := range src {
		dst[i] = u8ToF32[v]
	}
	return out, nil
}

var u8ToF32 = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(i) / 255
	}
	return
}()

// FloatTable returns ToFloat as lookup tables, followed by Normalize(mean,
// std) when mean is not nil (with mean nil, std is ignored), for images
// whose last axis has c channels (0 when unknown: mean and std must then be
// single values). The tables hold the very float32s ToFloat and Normalize
// compute, so converting through them later, where the image is copied
// anyway, changes no bit.
func FloatTable(mean, std []float32, c int) (*tensor.FloatLUT, error) {
	if mean == nil {
		return tensor.AffineLUT([]float32{0}, []float32{1}, "to_float"), nil
	}
	n := max(len(mean), len(std))
	switch {
	case len(mean) == 0 || len(std) == 0:
		return nil, fmt.Errorf("imageops: normalize: %w: mean and std need a value each", ErrArgument)
	case n > 1 && n != c || len(mean) != 1 && len(mean) != n || len(std) != 1 && len(std) != n:
		return nil, fmt.Errorf("imageops: normalize: %w: mean has %d and std %d values, %s", ErrArgument, len(mean), len(std), wantChannels(c))
	}
	sub, mul := make([]float32, n), make([]float32, n)
	for i := range sub {
		m, s := mean[min(i, len(mean)-1)], std[min(i, len(std)-1)]
		if s == 0 {
			return nil, fmt.Errorf("imageops: normalize: %w: std is 0 for channel %d", ErrArgument, i)
		}
		sub[i], mul[i] = m, 1/s
	}
	return tensor.AffineLUT(sub, mul, "to_float | normalize"), nil
}

// wantChannels says how many mean or std values an image of c channels takes.
func wantChannels(c int) string {
	if c == 1 {
		return "want 1 for the image's 1 channel"
	}
	return fmt.Sprintf("want 1 or %d for the image's %d channels", c, c)
}

// Normalize returns (img - mean) * (1/std), the reciprocal in float32, for
// a float32 image whose last axis is channels: within 1 ulp of dividing,
// and cheaper. mean and std hold one value for all channels or one per
// channel.
func Normalize(img *tensor.Tensor, mean, std []float32) (*tensor.Tensor, error) {
	if img == nil || img.DType != tensor.Float32 || len(img.Shape) == 0 {
		return nil, fmt.Errorf("imageops: normalize: %w: want a float32 image (apply to_float first), got %s", ErrArgument, shapeOf(img))
	}
	c := img.Shape[len(img.Shape)-1]
	if len(mean) != 1 && len(mean) != c || len(std) != 1 && len(std) != c {
		return nil, fmt.Errorf("imageops: normalize: %w: mean has %d and std %d values, %s", ErrArgument, len(mean), len(std), wantChannels(c))
	}
	m := make([]float32, c)
	inv := make([]float32, c)
	for i := range m {
		m[i] = mean[min(i, len(mean)-1)]
		s := std[min(i, len(std)-1)]
		if s == 0 {
			return nil, fmt.Errorf("imageops: normalize: %w: std is 0 for channel %d", ErrArgument, i)
		}
		inv[i] = 1 / s
	}
	out := tensor.Alloc(tensor.Float32, img.Shape...)
	src, dst := img.Float32(), out.Float32()
	if c == 3 {
		for i := 0; i+2 < len(src); i += 3 {
			s := src[i : i+3 : i+3]
			d := dst[i : i+3 : i+3]
			d[0] = (s[0] - m[0]) * inv[0]
			d[1] = (s[1] - m[1]) * inv[1]
			d[2] = (s[2] - m[2]) * inv[2]
		}
		return out, nil
	}
	for i, v := range src {
		ch := i % c
		dst[i] = (v - m[ch]) * inv[ch]
	}
	return out, nil
}

// Transpose permutes the axes of a tensor of any dtype and rank: perm[i] is
// the input axis that becomes output axis i, so [2, 0, 1] turns HWC into CHW
// and [1, 2, 0] turns CHW back into HWC.
func Transpose(img *tensor.Tensor, perm []int) (*tensor.Tensor, error) {
	if img == nil {
		return nil, fmt.Errorf("imageops: transpose: %w: nil tensor", ErrArgument)
	}
	r := len(img.Shape)
	if len(perm) != r {
		return nil, fmt.Errorf("imageops: transpose: %w: perm %v for a rank-%d tensor", ErrArgument, perm, r)
	}
	seen := make([]bool, r)
	for _, p := range perm {
		if p < 0 || p >= r || seen[p] {
			return nil, fmt.Errorf("imageops: transpose: %w: perm %v is not a permutation of 0..%d", ErrArgument, perm, r-1)
		}
		seen[p] = true
	}
	es := img.DType.Size()
	shape := make([]int, r)
	for i, p := range perm {
		shape[i] = img.Shape[p]
	}
	out := tensor.Alloc(img.DType, shape...)
	out.Booleans = img.Booleans // the same elements, reordered
	if len(out.Data) == 0 {
		return out, nil
	}
	// Fast path for the HWC→CHW layout change models need most.
	if r == 3 && perm[0] == 2 && perm[1] == 0 && perm[2] == 1 {
		h, w, c := img.Shape[0], img.Shape[1], img.Shape[2]
		switch es {
		case 4:
			src, dst := bytesAsF32(img.Data), bytesAsF32(out.Data)
			for ch := 0; ch < c; ch++ {
				plane := dst[ch*h*w : (ch+1)*h*w]
				for i := range plane {
					plane[i] = src[i*c+ch]
				}
			}
			return out, nil
		case 1:
			for ch := 0; ch < c; ch++ {
				plane := out.Data[ch*h*w : (ch+1)*h*w]
				for i := range plane {
					plane[i] = img.Data[i*c+ch]
				}
			}
			return out, nil
		}
	}
	// General case: walk the output in order with an odometer over its
	// index, tracking the matching input offset by the input strides.
	inStride := make([]int, r)
	s := es
	for i := r - 1; i >= 0; i-- {
		inStride[i] = s
		s *= img.Shape[i]
	}
	step := make([]int, r)
	for i, p := range perm {
		step[i] = inStride[p]
	}
	idx := make([]int, r)
	off := 0
	for o := 0; o < len(out.Data); o += es {
		copy(out.Data[o:o+es], img.Data[off:off+es])
		for a := r - 1; a >= 0; a-- {
			idx[a]++
			off += step[a]
			if idx[a] < shape[a] {
				break
			}
			off -= step[a] * shape[a]
			idx[a] = 0
		}
	}
	return out, nil
}

// Cast converts every element to dt (uint8 saturates, integers truncate).
func Cast(img *tensor.Tensor, dt tensor.DType) (*tensor.Tensor, error) {
	if img == nil {
		return nil, fmt.Errorf("imageops: cast: %w: nil tensor", ErrArgument)
	}
	if dt.Size() == 0 || img.DType.Size() == 0 {
		return nil, fmt.Errorf("imageops: cast: %w: cannot cast %s to %s", ErrArgument, img.DType, dt)
	}
	return img.Cast(dt), nil
}
