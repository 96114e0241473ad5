package expression

import (
	"fmt"
	"reflect"

	"github.com/piperun/piperun/imageops"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/tensor"
)

// The colour and geometry augmentations beyond DESIGN.md §2's list, as
// torchvision's functions on tensors compute them (ColorJitter, Grayscale,
// RandomVerticalFlip) and tf.image.rot90 turns: what an ImageNet or
// self-supervised recipe adds to random_resized_crop and flip_left_right.
func init() {
	r := defaultRegistry
	r.Register(withProbability("flip_up_down", "Mirrors the image top to bottom with probability p.", imageArg, nil, imageops.FlipUpDown))
	r.Register(&Func{
		Name: "uniform", Signature: "uniform(lo, hi)", Doc: "A float drawn uniformly from [lo, hi), by call site and sample: uniform(0, 1) < p ? f(img) : img applies f with probability p.",
		MinArgs: 2, MaxArgs: 2, Random: true,
		Returns: reflect.TypeOf(0.0),
		Check: func(a []Arg) (sample.Type, error) {
			for i := range 2 {
				if err := wantKind(a, i, sample.Float); err != nil {
					return sample.TAny, err
				}
			}
			lo, ok1 := constFloat(a[0])
			hi, ok2 := constFloat(a[1])
			if ok1 && ok2 && lo > hi {
				return sample.TAny, fmt.Errorf("lo %v is more than hi %v", lo, hi)
			}
			return sample.TFloat, nil
		},
		Impl: func(c *Call, a []any) (any, error) {
			lo, ok1 := toFloat(a[0])
			hi, ok2 := toFloat(a[1])
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("lo and hi must be numbers, got %s and %s", typeName(a[0]), typeName(a[1]))
			}
			if !(lo <= hi) {
				return nil, fmt.Errorf("lo %v is more than hi %v", lo, hi)
			}
			return lo + (hi-lo)*c.Rand.Float64(), nil
		},
	})
	r.Register(withProbability("random_grayscale", "torchvision's RandomGrayscale: with probability p, the image's gray in as many channels as it has (1 or 3).", colorArg,
		func(img *tensor.Tensor) error { return imageops.CheckColor("random_grayscale", img) },
		func(img *tensor.Tensor) (*tensor.Tensor, error) {
			channels := 1
			if len(img.Shape) == 3 {
				channels = img.Shape[2] // else Grayscale says what is wrong
			}
			return imageops.Grayscale(img, channels)
		}))
	r.Register(&Func{
		Name: "rot90", Signature: "rot90(img, k)", Doc: "Turns the image k quarter turns counter-clockwise (negative k: clockwise), as tf.image.rot90.",
		MinArgs: 2, MaxArgs: 2,
		Returns: tensorPtr,
		Check: func(a []Arg) (sample.Type, error) {
			img, err := imageArg(a, 0)
			if err != nil {
				return sample.TAny, err
			}
			if err := wantKind(a, 1, sample.Int); err != nil {
				return sample.TAny, err
			}
			if len(img.Shape) != 3 {
				return img, nil
			}
			out := img
			out.Shape = append([]int(nil), img.Shape...)
			switch k, ok := constInt(a[1]); {
			case ok && k%2 != 0:
				out.Shape[0], out.Shape[1] = img.Shape[1], img.Shape[0]
			case !ok && img.Shape[0] != img.Shape[1]:
				out.Shape[0], out.Shape[1] = -1, -1 // turned or not, by the sample
			}
			return out, nil
		},
		Impl: func(_ *Call, a []any) (any, error) {
			img, err := imageIn(a, 0)
			if err != nil {
				return nil, err
			}
			k, ok := toInt(a[1])
			if !ok {
				return nil, fmt.Errorf("argument 2 must be an integer, got %s", typeName(a[1]))
			}
			return imageops.Rot90(img, int(k%4))
		},
	})
	r.Register(&Func{
		Name: "grayscale", Signature: "grayscale(img[, channels])", Doc: "Gray with weights 0.2989, 0.587, 0.114, as channels 1 (default) or 3 copies; img has 1 or 3 channels.",
		MinArgs: 1, MaxArgs: 2,
		Returns: tensorPtr,
		Check: func(a []Arg) (sample.Type, error) {
			img, err := colorArg(a, 0)
			if err != nil {
				return sample.TAny, err
			}
			channels := 1
			if len(a) > 1 {
				if err := wantKind(a, 1, sample.Int); err != nil {
					return sample.TAny, err
				}
				k, ok := constInt(a[1])
				switch {
				case ok && k != 1 && k != 3:
					return sample.TAny, argErrorf(1, "must be 1 or 3 (the channels of the gray image), got %d", k)
				case ok:
					channels = k
				default:
					channels = -1
				}
			}
			if len(img.Shape) != 3 {
				return img, nil
			}
			out := img
			out.Shape = []int{img.Shape[0], img.Shape[1], channels}
			return out, nil
		},
		Impl: func(_ *Call, a []any) (any, error) {
			img, err := imageIn(a, 0)
			if err != nil {
				return nil, err
			}
			channels := int64(1)
			if len(a) > 1 {
				var ok bool
				if channels, ok = toInt(a[1]); !ok {
					return nil, fmt.Errorf("argument 2 must be an integer, got %s", typeName(a[1]))
				}
			}
			return imageops.Grayscale(img, int(channels))
		},
	})
	for _, f := range []struct {
		name, doc string
		fn        func(*tensor.Tensor, float64) (*tensor.Tensor, error)
	}{
		{"adjust_brightness", "Multiplies the levels by factor (0 black, 1 the image), clamped to the dtype's range.", imageops.AdjustBrightness},
		{"adjust_contrast", "Blends with the mean of the image's gray by factor (0 that gray, 1 the image, 2 twice the contrast).", imageops.AdjustContrast},
		{"adjust_saturation", "Blends each pixel with its gray by factor (0 grayscale, 1 the image, 2 twice the saturation).", imageops.AdjustSaturation},
	} {
		r.Register(&Func{
			Name: f.name, Signature: f.name + "(img, factor)", Doc: f.doc + " img is uint8 or float32 in [0, 1], 1 or 3 channels.",
			MinArgs: 2, MaxArgs: 2,
			Returns: tensorPtr,
			Check: func(a []Arg) (sample.Type, error) {
				img, err := colorArg(a, 0)
				if err != nil {
					return sample.TAny, err
				}
				return img, amountArg(a, 1, "factor")
			},
			Impl: func(_ *Call, a []any) (any, error) {
				img, err := imageIn(a, 0)
				if err != nil {
					return nil, err
				}
				v, ok := toFloat(a[1])
				if !ok {
					return nil, fmt.Errorf("argument 2 must be a number, got %s", typeName(a[1]))
				}
				return f.fn(img, v)
			},
		})
	}
	r.Register(&Func{
		Name: "color_jitter", Signature: "color_jitter(img, brightness, contrast, saturation)",
		Doc:     "torchvision's ColorJitter without hue: each amount v > 0 draws a factor in [max(0, 1-v), 1+v], or in [lo, hi] for a list [lo, hi], applied in a random order; 0 leaves that property alone.",
		MinArgs: 4, MaxArgs: 4, Random: true,
		Returns: tensorPtr,
		Check: func(a []Arg) (sample.Type, error) {
			img, err := colorArg(a, 0)
			if err != nil {
				return sample.TAny, err
			}
			for i, name := range []string{"brightness", "contrast", "saturation"} {
				if err := jitterArg(a, i+1, name); err != nil {
					return sample.TAny, err
				}
			}
			return img, nil
		},
		Impl: func(c *Call, a []any) (any, error) {
			img, err := imageIn(a, 0)
			if err != nil {
				return nil, err
			}
			var j [3]imageops.Jitter
			for i, name := range []string{"brightness", "contrast", "saturation"} {
				if j[i], err = jitterIn(a[i+1]); err != nil {
					return nil, fmt.Errorf("argument %d (%s) %w", i+2, name, err)
				}
			}
			return imageops.ColorJitter(img, j[0], j[1], j[2], c.Rand)
		},
	})
}

// withProbability is a function name(img, p) that applies op to an image
// (argument 0, as arg checks it) with probability p: the flips,
// random_grayscale. check, when set, checks the image whether op runs or
// not: a re-test's random_grayscale(0.02) of an image it could never take
// ran 41 samples before its draw hit one.
func withProbability(name, doc string, arg func([]Arg, int) (sample.Type, error), check func(*tensor.Tensor) error, op func(*tensor.Tensor) (*tensor.Tensor, error)) *Func {
	return &Func{
		Name: name, Signature: name + "(img, p)", Doc: doc,
		MinArgs: 2, MaxArgs: 2, Random: true,
		Returns: tensorPtr,
		Check: func(a []Arg) (sample.Type, error) {
			img, err := arg(a, 0)
			if err != nil {
				return sample.TAny, err
			}
			if err := probabilityArg(a, 1); err != nil {
				return sample.TAny, err
			}
			return img, nil
		},
		Impl: func(c *Call, a []any) (any, error) {
			img, err := imageIn(a, 0)
			if err != nil {
				return nil, err
			}
			p, err := probabilityIn(a, 1)
			if err != nil {
				return nil, err
			}
			if check != nil {
				if err := check(img); err != nil {
					return nil, err
				}
			}
			if c.Rand.Float64() < p {
				return op(img)
			}
			return img, nil
		},
	}
}

// colorArg is argument i of a colour function: an image whose dtype,
// where known, is uint8 or float32 and whose channels, where known, are 1
// or 3, as torchvision's functions take.
func colorArg(a []Arg, i int) (sample.Type, error) {
	img, err := imageArg(a, i)
	if err != nil {
		return sample.TAny, err
	}
	switch specDType(img) {
	case tensor.Invalid, tensor.Uint8, tensor.Float32:
	default:
		return sample.TAny, argErrorf(i, "must be a uint8 or float32 image, got %s", img)
	}
	if n := len(img.Shape); n == 3 && img.Shape[2] > 0 && img.Shape[2] != 1 && img.Shape[2] != 3 {
		return sample.TAny, argErrorf(i, "must have 1 or 3 channels, got %s (decode_image(…, 3) gives 3)", img)
	}
	return img, nil
}

// amountArg checks a factor or jitter amount: a number, at least 0 where
// it is a constant.
func amountArg(a []Arg, i int, name string) error {
	if err := wantKind(a, i, sample.Float); err != nil {
		return err
	}
	if v, ok := constFloat(a[i]); ok && !(v >= 0) {
		return argErrorf(i, "(%s) must be at least 0, got %v", name, v)
	}
	return nil
}

// jitterArg checks a color_jitter amount: a number at least 0, or a list
// [lo, hi] of two (torchvision's (min, max)), 0 <= lo <= hi, where it is a
// constant.
func jitterArg(a []Arg, i int, name string) error {
	t := a[i].Type
	if t.Kind != sample.List {
		return amountArg(a, i, name)
	}
	if t.Elem != sample.Float && t.Elem != sample.Int && t.Elem != sample.Any {
		return argErrorf(i, "(%s) must be a number or a list [lo, hi] of numbers, got %s", name, t)
	}
	if l, ok := a[i].Const.([]any); a[i].IsConst && ok {
		if _, err := jitterIn(l); err != nil {
			return argErrorf(i, "(%s) %v", name, err)
		}
	}
	return nil
}

// jitterIn is a color_jitter amount as run.
func jitterIn(v any) (imageops.Jitter, error) {
	if f, ok := toFloat(v); ok {
		if !(f >= 0) {
			return imageops.Jitter{}, fmt.Errorf("must be at least 0, got %v", f)
		}
		return imageops.JitterAmount(f), nil
	}
	l, ok := v.([]any)
	if !ok || len(l) != 2 {
		return imageops.Jitter{}, fmt.Errorf("must be a number or a list [lo, hi] of two numbers, got %s", typeName(v))
	}
	lo, ok1 := toFloat(l[0])
	hi, ok2 := toFloat(l[1])
	if !ok1 || !ok2 || !(lo >= 0) || lo > hi {
		return imageops.Jitter{}, fmt.Errorf("is a range [lo, hi] that needs 0 <= lo <= hi, got [%v, %v]", l[0], l[1])
	}
	return imageops.Jitter{Lo: lo, Hi: hi}, nil
}

// probabilityArg checks argument i as a probability: a number, in [0, 1]
// where it is a constant.
func probabilityArg(a []Arg, i int) error {
	if err := wantKind(a, i, sample.Float); err != nil {
		return err
	}
	if p, ok := constFloat(a[i]); ok && (p < 0 || p > 1) {
		return fmt.Errorf("probability %v is outside [0, 1]", p)
	}
	return nil
}

// probabilityIn is argument i as run: a number in [0, 1], as validate
// checks a constant (a p computed from a field ran from -20 to 20
// without a word).
func probabilityIn(a []any, i int) (float64, error) {
	p, ok := toFloat(a[i])
	if !ok {
		return 0, fmt.Errorf("argument %d must be a probability, got %s", i+1, typeName(a[i]))
	}
	if !(p >= 0 && p <= 1) {
		return 0, fmt.Errorf("probability %v is outside [0, 1]", p)
	}
	return p, nil
}
