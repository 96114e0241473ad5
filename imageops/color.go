package imageops

import (
	"fmt"
	"math"

	"github.com/piperun/piperun/tensor"
)

// The colour functions compute as torchvision's functions on tensors do
// (torchvision.transforms.functional, which ColorJitter and Grayscale
// call): in float32, blending the image with a second one and clamping to
// the dtype's range, [0, 255] for uint8, truncated to a level as
// Tensor.to(torch.uint8) truncates, and [0, 1] for float32. So a float
// image should be jittered before normalize, as in torchvision.

// FlipUpDown mirrors an HWC image of any dtype vertically.
func FlipUpDown(img *tensor.Tensor) (*tensor.Tensor, error) {
	if img == nil || len(img.Shape) != 3 {
		return nil, fmt.Errorf("imageops: flip_up_down: %w: want an HWC image of rank 3, got %v", ErrArgument, shapeOf(img))
	}
	h, w, c := img.Shape[0], img.Shape[1], img.Shape[2]
	row := w * c * img.DType.Size()
	if len(img.Data) < h*row {
		return nil, fmt.Errorf("imageops: flip_up_down: %w: data too short for %v", ErrArgument, img.Shape)
	}
	out := tensor.Alloc(img.DType, h, w, c)
	for y := 0; y < h; y++ {
		copy(out.Data[y*row:(y+1)*row], img.Data[(h-1-y)*row:(h-y)*row])
	}
	return out, nil
}

// Rot90 rotates an HWC image of any dtype by k quarter turns
// counter-clockwise, as tf.image.rot90 and numpy.rot90 do (a negative k
// turns clockwise): an odd k swaps height and width.
func Rot90(img *tensor.Tensor, k int) (*tensor.Tensor, error) {
	if img == nil || len(img.Shape) != 3 {
		return nil, fmt.Errorf("imageops: rot90: %w: want an HWC image of rank 3, got %v", ErrArgument, shapeOf(img))
	}
	h, w, c := img.Shape[0], img.Shape[1], img.Shape[2]
	px := c * img.DType.Size()
	if len(img.Data) < h*w*px {
		return nil, fmt.Errorf("imageops: rot90: %w: data too short for %v", ErrArgument, img.Shape)
	}
	k = ((k % 4) + 4) % 4
	oh, ow := h, w
	if k%2 == 1 {
		oh, ow = w, h
	}
	out := tensor.Alloc(img.DType, oh, ow, c)
	// Output pixel (y, x) is input pixel base + y*sy + x*sx.
	var base, sy, sx int
	switch k {
	case 0:
		base, sy, sx = 0, w, 1
	case 1: // out[y][x] = in[x][w-1-y]
		base, sy, sx = w-1, -1, w
	case 2:
		base, sy, sx = (h-1)*w+w-1, -w, -1
	case 3: // out[y][x] = in[h-1-x][y]
		base, sy, sx = (h-1)*w, 1, -w
	}
	src, dst := img.Data[:h*w*px], out.Data[:h*w*px]
	for y := 0; y < oh; y++ {
		s := base + y*sy
		row := dst[y*ow*px : (y+1)*ow*px]
		if px == 3 {
			for x := 0; x < ow; x++ {
				q := src[3*s : 3*s+3 : 3*s+3]
				d := row[3*x : 3*x+3 : 3*x+3]
				d[0], d[1], d[2] = q[0], q[1], q[2]
				s += sx
			}
			continue
		}
		for x := 0; x < ow; x++ {
			copy(row[x*px:(x+1)*px], src[s*px:(s+1)*px])
			s += sx
		}
	}
	return out, nil
}

// colorImage checks an image the colour functions take: HWC, uint8 or
// float32, 1 or 3 channels, as torchvision's functions do.
func colorImage(op string, img *tensor.Tensor) (h, w, c int, err error) {
	h, w, c, err = checkImage(img)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("imageops: %s: %w", op, err)
	}
	if c != 1 && c != 3 {
		return 0, 0, 0, fmt.Errorf("imageops: %s: %w: want 1 or 3 channels, got %d (%v)", op, ErrArgument, c, img.Shape)
	}
	return h, w, c, nil
}

// blendable checks what a blend (brightness, contrast, saturation) does
// to a float32 image: it clamps to [0, 1], and a normalized image lost 44
// to 68 % of its values to 0 without a word (a new user's test;
// torchvision clamps as silently). A bicubic resize's overshoot stays
// within the slack.
func blendable(op string, img *tensor.Tensor) error {
	if _, _, _, err := colorImage(op, img); err != nil || img.DType != tensor.Float32 {
		return err
	}
	lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
	for _, v := range img.Float32()[:img.Shape[0]*img.Shape[1]*img.Shape[2]] {
		lo, hi = min(lo, v), max(hi, v)
	}
	if lo < -floatSlack || hi > 1+floatSlack {
		return fmt.Errorf("imageops: %s: %w: the float32 image's values run from %.3g to %.3g, and it blends them clamped to [0, 1], as to_float gives them: after normalize they would be lost; apply it before normalize", op, ErrArgument, lo, hi)
	}
	return nil
}

// floatSlack is how far outside [0, 1] a float32 image's values may lie
// for a blend: a bicubic upscale overshoots by up to about 0.28 (a
// re-test refused a photo at -0.209 and 1.26 with 0.25), a normalize by
// 2 or more.
const floatSlack = 0.5

// CheckColor checks img as the colour functions take it: HWC, uint8 or
// float32, 1 or 3 channels. op names the function in the error.
func CheckColor(op string, img *tensor.Tensor) error {
	_, _, _, err := colorImage(op, img)
	return err
}

// gray is torchvision's rgb_to_grayscale of one pixel in float32, its
// weights and order of addition kept (the explicit conversions keep Go
// from fusing a multiply and an add, which rounds differently).
func gray(r, g, b float32) float32 {
	return float32(float32(float32(0.2989)*r)+float32(float32(0.587)*g)) + float32(float32(0.114)*b)
}

// grayLUT holds gray's three products for each of the 256 levels, so
// that a uint8 pixel's gray takes two additions: the same float32
// operations in the same order.
type grayLUT struct{ r, g, b [256]float32 }

var gray8LUT = func() (t grayLUT) {
	for v := range 256 {
		f := float32(v)
		t.r[v], t.g[v], t.b[v] = float32(0.2989)*f, float32(0.587)*f, float32(0.114)*f
	}
	return t
}()

// gray8 is gray for uint8, truncated to a level as torchvision's
// rgb_to_grayscale gives it (and as it blends with it).
func gray8(r, g, b uint8) uint8 {
	t := &gray8LUT
	return uint8(clamp(float32(float32(t.r[r]+t.g[g])+t.b[b]), 255))
}

// weights are a blend's ratio and 1 - ratio as float32, the second
// computed in float64 first as Python computes it before torch takes it.
type weights struct{ r, q, bound float32 }

func weigh(ratio float64, dt tensor.DType) weights {
	b := float32(1)
	if dt == tensor.Uint8 {
		b = 255
	}
	return weights{r: float32(ratio), q: float32(1 - ratio), bound: b}
}

// blend returns ratio*x + (1-ratio)*y clamped to [0, bound], as
// torchvision's _blend does in float32.
func (w weights) blend(x, y float32) float32 {
	return clamp(float32(float32(w.r*x)+float32(w.q*y)), w.bound)
}

// clamp limits v to [0, hi]. Go's min and max of floats order NaNs and
// signed zeros, which cost a third of a blend's time here; a NaN passes
// through, as torch.clamp passes it.
func clamp(v, hi float32) float32 {
	if v < 0 {
		return 0
	}
	if v > hi {
		return hi
	}
	return v
}

// blendWith blends every element of img with the constant y into a new
// image: brightness (y = 0) and contrast (y = the mean gray). A uint8
// image goes through a table of its 256 levels.
func blendWith(img *tensor.Tensor, y float32, wt weights) *tensor.Tensor {
	out := tensor.Alloc(img.DType, img.Shape...)
	if img.DType == tensor.Uint8 {
		var lut [256]uint8
		for v := range lut {
			lut[v] = uint8(wt.blend(float32(v), y))
		}
		dst := out.Data[:len(img.Data)]
		for i, v := range img.Data {
			dst[i] = lut[v]
		}
		return out
	}
	src := img.Float32()
	dst := out.Float32()[:len(src)]
	for i, v := range src {
		dst[i] = wt.blend(v, y)
	}
	return out
}

// Grayscale converts a 1- or 3-channel image to gray with torchvision's
// (and tf.image.rgb_to_grayscale's) weights 0.2989, 0.587 and 0.114, into
// channels 1 or 3 copies of it (torchvision's num_output_channels).
func Grayscale(img *tensor.Tensor, channels int) (*tensor.Tensor, error) {
	h, w, c, err := colorImage("grayscale", img)
	if err != nil {
		return nil, err
	}
	if channels != 1 && channels != 3 {
		return nil, fmt.Errorf("imageops: grayscale: %w: channels must be 1 or 3, got %d", ErrArgument, channels)
	}
	n := h * w
	out := tensor.Alloc(img.DType, h, w, channels)
	if img.DType == tensor.Uint8 {
		grayInto(img.Data[:n*c], out.Data[:n*channels], c, channels, gray8)
	} else {
		grayInto(img.Float32()[:n*c], out.Float32()[:n*channels], c, channels, gray)
	}
	return out, nil
}

// grayInto writes each pixel of src (c channels) to dst as channels
// copies of its gray, by g for 3 channels, as it is for 1.
func grayInto[T uint8 | float32](src, dst []T, c, channels int, g func(r, g, b T) T) {
	for p := 0; p < len(src)/c; p++ {
		v := src[p*c]
		if c == 3 {
			v = g(src[3*p], src[3*p+1], src[3*p+2])
		}
		for k := 0; k < channels; k++ {
			dst[p*channels+k] = v
		}
	}
}

// checkFactor refuses a factor or amount (what) that is negative, NaN or
// infinite.
func checkFactor(op, what string, f float64) error {
	// Past float32's range the blend's weights are infinite, and an
	// image came out black (a review: brightness 1e39).
	if !(f >= 0) || f > math.MaxFloat32 {
		return fmt.Errorf("imageops: %s: %w: %s must be a number from 0 to 3.4e38 (float32's range), got %v", op, ErrArgument, what, f)
	}
	return nil
}

// AdjustBrightness multiplies every level by factor (0 gives black, 1 the
// image), clamped to the dtype's range.
func AdjustBrightness(img *tensor.Tensor, factor float64) (*tensor.Tensor, error) {
	return checked("adjust_brightness", img, factor, adjustBrightness)
}

// checked runs adjust on img after checking both, as the Adjust
// functions take them; ColorJitter checks once and runs the adjustments
// unchecked, where each check was a pass over a float image.
func checked(op string, img *tensor.Tensor, factor float64, adjust func(*tensor.Tensor, float64) *tensor.Tensor) (*tensor.Tensor, error) {
	if err := blendable(op, img); err != nil {
		return nil, err
	}
	if err := checkFactor(op, "the factor", factor); err != nil {
		return nil, err
	}
	return adjust(img, factor), nil
}

func adjustBrightness(img *tensor.Tensor, factor float64) *tensor.Tensor {
	return blendWith(img, 0, weigh(factor, img.DType))
}

// AdjustContrast blends the image with the mean of its grayscale (0 gives
// a gray image of that mean, 1 the image, 2 twice the contrast).
func AdjustContrast(img *tensor.Tensor, factor float64) (*tensor.Tensor, error) {
	return checked("adjust_contrast", img, factor, adjustContrast)
}

func adjustContrast(img *tensor.Tensor, factor float64) *tensor.Tensor {
	h, w, c := img.Shape[0], img.Shape[1], img.Shape[2]
	// torch.mean sums float32 pairwise, and its mean of a float32
	// image can be an ulp from the exact one this float64 sum rounds
	// to (a review: 1 ulp apart in 10-25 % of values at 224×224 and
	// above); uint8 levels sum exactly either way.
	var sum float64
	n := h * w
	if img.DType == tensor.Uint8 {
		src := img.Data[:n*c]
		var levels uint64
		for p := 0; p < n; p++ {
			if c == 3 {
				levels += uint64(gray8(src[3*p], src[3*p+1], src[3*p+2]))
			} else {
				levels += uint64(src[p])
			}
		}
		sum = float64(levels)
	} else {
		src := img.Float32()[:n*c]
		for p := 0; p < n; p++ {
			if c == 3 {
				sum += float64(gray(src[3*p], src[3*p+1], src[3*p+2]))
			} else {
				sum += float64(src[p])
			}
		}
	}
	return blendWith(img, float32(sum/float64(n)), weigh(factor, img.DType))
}

// AdjustSaturation blends each pixel with its gray (0 gives the grayscale
// image, 1 the image, 2 twice the saturation); a 1-channel image comes
// back as it is.
func AdjustSaturation(img *tensor.Tensor, factor float64) (*tensor.Tensor, error) {
	return checked("adjust_saturation", img, factor, adjustSaturation)
}

func adjustSaturation(img *tensor.Tensor, factor float64) *tensor.Tensor {
	h, w, c := img.Shape[0], img.Shape[1], img.Shape[2]
	if c == 1 {
		return img.Clone()
	}
	n := h * w
	out := tensor.Alloc(img.DType, h, w, c)
	wt := weigh(factor, img.DType)
	if img.DType == tensor.Uint8 {
		// The blend's products of the 256 levels, made once: the same
		// float32 operation as blend's.
		var wr [256]float32
		for v := range 256 {
			wr[v] = wt.r * float32(v)
		}
		src, dst := img.Data[:3*n], out.Data[:3*n]
		for p := 0; p < n; p++ {
			px := src[3*p : 3*p+3 : 3*p+3]
			qg := wt.q * float32(gray8(px[0], px[1], px[2]))
			d := dst[3*p : 3*p+3 : 3*p+3]
			d[0] = uint8(clamp(float32(wr[px[0]]+qg), 255))
			d[1] = uint8(clamp(float32(wr[px[1]]+qg), 255))
			d[2] = uint8(clamp(float32(wr[px[2]]+qg), 255))
		}
		return out
	}
	src, dst := img.Float32()[:3*n], out.Float32()[:3*n]
	for p := 0; p < n; p++ {
		px := src[3*p : 3*p+3 : 3*p+3]
		g := gray(px[0], px[1], px[2])
		d := dst[3*p : 3*p+3 : 3*p+3]
		d[0] = wt.blend(px[0], g)
		d[1] = wt.blend(px[1], g)
		d[2] = wt.blend(px[2], g)
	}
	return out
}

// Jitter is the range ColorJitter draws one property's factor from,
// torchvision's (min, max); Off leaves the property alone.
type Jitter struct {
	Lo, Hi float64
	Off    bool
}

// JitterAmount is torchvision's single-number form, v at least 0:
// [max(0, 1-v), 1+v], and off for 0.
func JitterAmount(v float64) Jitter {
	if v == 0 {
		return Jitter{Off: true}
	}
	return Jitter{Lo: max(0, 1-v), Hi: 1 + v}
}

// check refuses a range torchvision's ColorJitter refuses, and one past
// float32's range.
func (j Jitter) check(what string) error {
	if j.Off {
		return nil
	}
	if err := checkFactor("color_jitter", what, j.Lo); err != nil {
		return err
	}
	if err := checkFactor("color_jitter", what, j.Hi); err != nil {
		return err
	}
	if j.Lo > j.Hi {
		return fmt.Errorf("imageops: color_jitter: %w: %s's range [%v, %v] runs backwards", ErrArgument, what, j.Lo, j.Hi)
	}
	return nil
}

// ColorJitter is torchvision's ColorJitter(brightness, contrast,
// saturation) without hue: each property that is not off draws a factor
// uniformly from its range, and the adjustments run in an order drawn at
// random, all from rng.
func ColorJitter(img *tensor.Tensor, brightness, contrast, saturation Jitter, rng RNG) (*tensor.Tensor, error) {
	if err := blendable("color_jitter", img); err != nil {
		return nil, err
	}
	ranges := [3]Jitter{brightness, contrast, saturation}
	for i, j := range ranges {
		if err := j.check([3]string{"brightness", "contrast", "saturation"}[i]); err != nil {
			return nil, err
		}
	}
	adjust := [3]func(*tensor.Tensor, float64) *tensor.Tensor{adjustBrightness, adjustContrast, adjustSaturation}
	// Drawn whether used or not, so that one amount set to 0 leaves the
	// others' draws as they were.
	order := [3]int{0, 1, 2}
	for i := 2; i > 0; i-- { // Fisher–Yates
		j := int(rng.Float64() * float64(i+1))
		order[i], order[j] = order[j], order[i]
	}
	var factors [3]float64
	for i, j := range ranges {
		factors[i] = j.Lo + (j.Hi-j.Lo)*rng.Float64()
	}
	out := img
	for _, i := range order {
		if ranges[i].Off {
			continue
		}
		next := adjust[i](out, factors[i])
		if out != img {
			out.Recycle()
		}
		out = next
	}
	if out == img {
		return img.Clone(), nil
	}
	return out, nil
}
