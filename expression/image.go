package expression

import (
	"fmt"
	"math"

	"github.com/piperun/piperun/imageops"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/tensor"
)

// The image functions (DESIGN.md §2). Images are HWC tensors: uint8 after
// decode_image, float32 after to_float or normalize.
func init() {
	r := defaultRegistry
	r.Register(&Func{
		Name: "decode_image", Signature: "decode_image(bytes, channels[, max_pixels])",
		Doc:     "Decodes JPEG or PNG to uint8 [H, W, C], upright after EXIF orientation; channels 0 (as stored), 1, 3 or 4; max_pixels refuses larger images before decoding (0 or absent: PIL's 178956970; negative: no pixel limit, decode memory still bounds them).",
		MinArgs: 2, MaxArgs: 3,
		Returns: tensorPtr,
		Check: func(a []Arg) (sample.Type, error) {
			if err := wantKind(a, 0, sample.Bytes); err != nil {
				if a[0].Type.Kind == sample.String {
					// Most likely a path (a files source's).
					err = fmt.Errorf("%w; to decode the file a path names, read it first: decode_image(read_file(path), …)", err)
				}
				return sample.TAny, err
			}
			c, err := channelsArg(a[1])
			if err != nil {
				return sample.TAny, err
			}
			if len(a) > 2 {
				if err := wantKind(a, 2, sample.Int); err != nil {
					return sample.TAny, err
				}
			}
			return sample.TensorOf(tensor.Uint8, -1, -1, c), nil
		},
		Impl: func(_ *Call, a []any) (any, error) {
			data, c, opts, done, err := decodeArgs(a)
			if err != nil {
				return nil, err
			}
			defer done()
			return imageops.Decode(data, c, opts)
		},
	})
	r.Register(&Func{
		Name: "resize", Signature: "resize(img, h, w[, method])",
		Doc:     "Resamples to h×w; method bilinear (default), nearest, area or bicubic; antialiased when shrinking.",
		MinArgs: 3, MaxArgs: 4,
		Returns: tensorPtr,
		Check: func(a []Arg) (sample.Type, error) {
			img, err := imageArg(a, 0)
			if err != nil {
				return sample.TAny, err
			}
			if img.DType != tensor.Uint8 && img.DType != tensor.Float32 && img.DType != tensor.Invalid {
				return sample.TAny, argErrorf(0, "must be a uint8 or float32 image, got %s", img)
			}
			return sizedLike(img, a, 1, methodArg(a, 3))
		},
		Impl: func(_ *Call, a []any) (any, error) {
			img, h, w, err := imgHW(a)
			if err != nil {
				return nil, err
			}
			m, err := method(a, 3)
			if err != nil {
				return nil, err
			}
			return imageops.Resize(img, h, w, m)
		},
	})
	r.Register(decodeResizeFunc("__decode_resize", "resize(decode_image(bytes, channels), h, w[, method])",
		tensor.Uint8, imageops.DecodeResize))
	r.Register(decodeResizeFunc("__decode_resize_float", "to_float(resize(decode_image(bytes, channels), h, w[, method]))",
		tensor.Float32, imageops.DecodeResizeFloat))
	r.Register(&Func{
		Name: "center_crop", Signature: "center_crop(img, h, w)", Doc: "The central h×w window.",
		MinArgs: 3, MaxArgs: 3,
		Returns: tensorPtr,
		Check: func(a []Arg) (sample.Type, error) {
			img, err := imageArg(a, 0)
			if err != nil {
				return sample.TAny, err
			}
			return sizedLike(img, a, 1, cropFits(img, a))
		},
		Impl: func(_ *Call, a []any) (any, error) {
			img, h, w, err := imgHW(a)
			if err != nil {
				return nil, err
			}
			return imageops.CenterCrop(img, h, w)
		},
	})
	r.Register(&Func{
		Name: "random_crop", Signature: "random_crop(img, h, w)", Doc: "A random h×w window.",
		MinArgs: 3, MaxArgs: 3, Random: true,
		Returns: tensorPtr,
		Check: func(a []Arg) (sample.Type, error) {
			img, err := imageArg(a, 0)
			if err != nil {
				return sample.TAny, err
			}
			return sizedLike(img, a, 1, cropFits(img, a))
		},
		Impl: func(c *Call, a []any) (any, error) {
			img, h, w, err := imgHW(a)
			if err != nil {
				return nil, err
			}
			return imageops.RandomCrop(img, h, w, c.Rand)
		},
	})
	r.Register(&Func{
		Name: "random_resized_crop", Signature: "random_resized_crop(img, h, w[, min_scale[, max_scale]])",
		Doc:     "Inception-style crop: a random window of 8–100% of the area (or the given scale range) and aspect ratio 3/4–4/3, resized to h×w.",
		MinArgs: 3, MaxArgs: 5, Random: true,
		Returns: tensorPtr,
		Check: func(a []Arg) (sample.Type, error) {
			img, err := imageArg(a, 0)
			if err != nil {
				return sample.TAny, err
			}
			for i := 3; i < len(a); i++ {
				if err := wantKind(a, i, sample.Float); err != nil {
					return sample.TAny, err
				}
			}
			if lo, hi, ok := scaleConsts(a, 3); ok && (lo <= 0 || hi > 1 || lo > hi) {
				return sample.TAny, fmt.Errorf("scale range [%v, %v] must satisfy 0 < min_scale <= max_scale <= 1", lo, hi)
			}
			return sizedLike(img, a, 1, nil)
		},
		Impl: func(c *Call, a []any) (any, error) {
			img, h, w, err := imgHW(a)
			if err != nil {
				return nil, err
			}
			lo, hi, err := scales(a, 3)
			if err != nil {
				return nil, err
			}
			return imageops.RandomResizedCrop(img, h, w, lo, hi, c.Rand)
		},
	})
	r.Register(&Func{
		Name: "__decode_rrc", Signature: "random_resized_crop(decode_image(bytes, channels), h, w[, min_scale[, max_scale]])",
		MinArgs: 4, MaxArgs: 6, Random: true,
		Returns: tensorPtr, // Check: the fusion's
		Impl: func(c *Call, a []any) (any, error) {
			data, ch, opts, done, err := decodeArgs(a[:2])
			if err != nil {
				return nil, err
			}
			defer done()
			h, w, err := hw(a, 2, tensor.Uint8, ch)
			if err != nil {
				return nil, fmt.Errorf("random_resized_crop: %w", err) // the caret points at decode_image
			}
			lo, hi, err := scales(a, 4)
			if err != nil {
				return nil, fmt.Errorf("random_resized_crop: %w", err)
			}
			opts.ScaleHint = imageops.ScaleHintFor(h, w, imageops.Bilinear)
			return imageops.DecodeRandomResizedCrop(data, ch, h, w, lo, hi, c.Rand, opts)
		},
	})
	r.Register(withProbability("flip_left_right", "Mirrors the image with probability p.", imageArg, nil, imageops.FlipLeftRight))
	r.Register(&Func{
		Name: "to_float", Signature: "to_float(img)", Doc: "uint8 → float32 in [0, 1].",
		MinArgs: 1, MaxArgs: 1,
		Returns: tensorPtr,
		Check: func(a []Arg) (sample.Type, error) {
			if a[0].Type.Kind != sample.Tensor && a[0].Type.Kind != sample.Any {
				return sample.TAny, argErrorf(0, "must be a tensor, got %s", a[0].Type)
			}
			// imageops.ToFloat scales uint8 levels and passes float32
			// through; any other dtype fails on the first sample, so say
			// it here, where the dtype is already known.
			switch specDType(a[0].Type) {
			case tensor.Invalid, tensor.Uint8, tensor.Float32:
			default:
				return sample.TAny, argErrorf(0, "must be a uint8 image (to_float scales its levels 0..255 to [0, 1]), got %s: use cast(x, \"uint8\") first if it holds such levels, or cast(x, \"float32\") instead to convert without scaling", a[0].Type)
			}
			return sample.Type{Kind: sample.Tensor, DType: tensor.Float32, Shape: a[0].Type.Shape}, nil
		},
		Impl: func(_ *Call, a []any) (any, error) {
			img, ok := a[0].(*tensor.Tensor)
			if !ok {
				return nil, fmt.Errorf("argument 1 must be a tensor, got %s", typeName(a[0]))
			}
			return imageops.ToFloat(img)
		},
	})
	r.Register(&Func{
		Name: "normalize", Signature: "normalize(img, mean, std)", Doc: "(img - mean) / std as float32; mean and std are numbers or per-channel lists.",
		MinArgs: 3, MaxArgs: 3,
		Returns: tensorPtr,
		Check: func(a []Arg) (sample.Type, error) {
			img, err := imageArg(a, 0)
			if err != nil {
				return sample.TAny, err
			}
			// imageops.Normalize takes float32 alone; a dtype known here
			// would fail on the first sample.
			switch specDType(img) {
			case tensor.Invalid, tensor.Float32:
			case tensor.Uint8:
				return sample.TAny, argErrorf(0, "must be a float32 image, got %s: apply to_float first", img)
			default:
				return sample.TAny, argErrorf(0, "must be a float32 image, got %s: convert it with cast(x, \"float32\") first", img)
			}
			channels := -1
			if n := len(img.Shape); n > 0 {
				channels = img.Shape[n-1]
			}
			for i := 1; i < 3; i++ {
				v, ok := floatList(a[i].Const)
				if a[i].IsConst && !ok {
					return sample.TAny, argErrorf(i, "must be a number or a list of numbers")
				}
				switch k := a[i].Type.Kind; {
				case k == sample.Bool || k == sample.String || k == sample.Bytes || k == sample.Tensor,
					k == sample.List && a[i].Type.Elem != sample.Int && a[i].Type.Elem != sample.Float && a[i].Type.Elem != sample.Any:
					// normalize(img, true, 1) passed and failed each image.
					return sample.TAny, argErrorf(i, "must be a number or a list of numbers, got %s", a[i].Type)
				}
				if !ok {
					continue
				}
				// Checked here, where a wrong count is a spec's mistake,
				// rather than on the first image at run time.
				if len(v) != 1 && channels > 0 && len(v) != channels {
					return sample.TAny, fmt.Errorf("%s has %d values, want %s for the image's %d channel%s",
						[]string{"", "mean", "std"}[i], len(v), oneOr(channels), channels, plural(channels))
				}
				if err := finiteNormalize(i, a[i].Const); err != nil {
					return sample.TAny, err
				}
			}
			return sample.Type{Kind: sample.Tensor, DType: tensor.Float32, Shape: img.Shape}, nil
		},
		Impl: func(_ *Call, a []any) (any, error) {
			img, ok := a[0].(*tensor.Tensor)
			if !ok {
				return nil, fmt.Errorf("argument 1 must be an image tensor, got %s", typeName(a[0]))
			}
			mean, ok1 := floatList(a[1])
			std, ok2 := floatList(a[2])
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("mean and std must be numbers or lists of numbers")
			}
			// Computed at run time, checked as constants are at validate
			// time: a NaN std wrote NaN images, and the run succeeded.
			for i := 1; i < 3; i++ {
				if err := finiteNormalize(i, a[i]); err != nil {
					return nil, err
				}
			}
			return imageops.Normalize(img, mean, std)
		},
	})
	r.Register(&Func{
		Name: "transpose", Signature: "transpose(img, perm)", Doc: "Permutes dimensions, e.g. [2, 0, 1] for HWC → CHW.",
		MinArgs: 2, MaxArgs: 2,
		Returns: tensorPtr,
		Check: func(a []Arg) (sample.Type, error) {
			t := a[0].Type
			if t.Kind != sample.Tensor && t.Kind != sample.Any {
				return sample.TAny, argErrorf(0, "must be a tensor, got %s", t)
			}
			perm, ok := intList(a[1].Const)
			if !a[1].IsConst || !ok {
				return sample.TAny, fmt.Errorf("perm must be a literal list of dimension indexes, e.g. [2, 0, 1]")
			}
			seen := map[int]bool{}
			for _, p := range perm {
				// Whatever the rank: [1, 1] passed where it was unknown
				// and failed each sample.
				if p < 0 || seen[p] || p >= len(perm) {
					return sample.TAny, fmt.Errorf("perm %v is not a permutation of 0..%d", perm, len(perm)-1)
				}
				seen[p] = true
			}
			if t.Shape == nil {
				return sample.Type{Kind: sample.Tensor, DType: t.DType}, nil
			}
			if len(perm) != len(t.Shape) {
				return sample.TAny, fmt.Errorf("perm %v has %d entries for a rank-%d tensor", perm, len(perm), len(t.Shape))
			}
			out := make([]int, len(perm))
			for i, p := range perm {
				out[i] = t.Shape[p]
			}
			return sample.TensorOf(t.DType, out...), nil
		},
		Impl: func(_ *Call, a []any) (any, error) {
			img, ok := a[0].(*tensor.Tensor)
			if !ok {
				return nil, fmt.Errorf("argument 1 must be a tensor, got %s", typeName(a[0]))
			}
			perm, ok := intList(a[1])
			if !ok {
				return nil, fmt.Errorf("perm must be a list of integers")
			}
			return imageops.Transpose(img, perm)
		},
	})
	r.AddFusion(Fusion{Outer: "resize", Inner: "decode_image", Into: "__decode_resize", InnerArgs: 2})
	r.AddFusion(Fusion{Outer: "random_resized_crop", Inner: "decode_image", Into: "__decode_rrc", InnerArgs: 2})
	// The patcher visits inner calls first, so to_float meets the inner
	// call already fused into __decode_resize.
	r.AddFusion(Fusion{Outer: "to_float", Inner: "__decode_resize", Into: "__decode_resize_float"})
}

// specDType is a tensor type's dtype in the spec's terms: a deferred
// uint8 tensor travels as levels but is float32 to whatever reads it.
// tensor.Invalid means the dtype is known only at run time.
func specDType(t sample.Type) tensor.DType {
	if t.Kind != sample.Tensor {
		return tensor.Invalid
	}
	if t.Deferred != nil {
		return tensor.Float32
	}
	return t.DType
}

func channelsArg(a Arg) (int, error) {
	if a.Type.Kind != sample.Int && a.Type.Kind != sample.Any {
		return 0, fmt.Errorf("channels must be an integer, got %s", a.Type)
	}
	c, ok := constInt(a)
	if !ok {
		return -1, nil
	}
	switch c {
	case 0:
		return -1, nil
	case 1, 3, 4:
		return c, nil
	}
	return 0, fmt.Errorf("channels must be 0 (as stored), 1, 3 or 4, got %d", c)
}

func imageArg(a []Arg, i int) (sample.Type, error) {
	t := a[i].Type
	if t.Kind == sample.Any {
		return sample.Type{Kind: sample.Tensor}, nil
	}
	if t.Kind != sample.Tensor {
		return sample.TAny, argErrorf(i, "must be an image tensor, got %s", t)
	}
	if t.Shape != nil && len(t.Shape) != 3 {
		return sample.TAny, argErrorf(i, "must be an HWC image (rank 3), got %s", t)
	}
	if looksChannelsFirst(t.Shape) {
		return sample.TAny, channelsFirstError(i, t.String())
	}
	return t, nil
}

// looksChannelsFirst reports whether shape is a CHW image rather than the
// HWC one image functions take: a first dimension of 1, 3 or 4 and a last
// one over 4. A channels-first tensor would be resized, cropped and
// flipped along the wrong axes without a word (found by new-user tests:
// flip_left_right after transpose(…, [2, 0, 1]) flipped vertically, and
// resize made an [8, 8, 600] "image"). Before the run a transposed decode
// is [3, ?, ?], which an HWC image of unknown channels resized to a height
// of 3 and a computed width also is, so validate decides
// only on a known last dimension and the run checks each tensor.
func looksChannelsFirst(s []int) bool {
	return len(s) == 3 && (s[0] == 1 || s[0] == 3 || s[0] == 4) && s[2] > 4
}

func channelsFirstError(i int, shape string) error {
	return argErrorf(i, "looks channels-first (%s): image functions take HWC [H, W, C]; apply them before transpose", shape)
}

// imageIn is argument i of an image function as run: a tensor that does
// not look channels-first (looksChannelsFirst), for the layouts validate
// could not see.
func imageIn(a []any, i int) (*tensor.Tensor, error) {
	img, ok := a[i].(*tensor.Tensor)
	if !ok {
		return nil, fmt.Errorf("argument %d must be an image tensor, got %s", i+1, typeName(a[i]))
	}
	if looksChannelsFirst(img.Shape) {
		return nil, channelsFirstError(i, img.String())
	}
	return img, nil
}

func methodArg(a []Arg, i int) error {
	if i >= len(a) {
		return nil
	}
	if err := wantKind(a, i, sample.String); err != nil {
		return err
	}
	if s, ok := a[i].Const.(string); ok {
		switch s {
		case "bilinear", "nearest", "area", "bicubic":
		default:
			return fmt.Errorf("unknown method %q (want bilinear, nearest, area or bicubic)", s)
		}
	}
	return nil
}

// cropFits refuses a crop of constant size larger than an image whose
// size is known, which would otherwise pass validate and fail every
// sample at run time.
func cropFits(img sample.Type, a []Arg) error {
	if len(img.Shape) != 3 {
		return nil
	}
	h, okh := constInt(a[1])
	w, okw := constInt(a[2])
	H, W := img.Shape[0], img.Shape[1]
	if okh && okw && H > 0 && W > 0 && (h > H || w > W) {
		return fmt.Errorf("a %d×%d (height×width) crop does not fit the %d×%d image (%s)", h, w, H, W, img)
	}
	return nil
}

// sizedLike is img with its height and width replaced by the constant
// arguments at i and i+1 (or unknown when they are not constants).
func sizedLike(img sample.Type, a []Arg, i int, extra error) (sample.Type, error) {
	if extra != nil {
		return sample.TAny, extra
	}
	dims := [2]int{-1, -1}
	for k := 0; k < 2; k++ {
		if err := wantKind(a, i+k, sample.Int); err != nil {
			return sample.TAny, err
		}
		if v, ok := constInt(a[i+k]); ok {
			if v < 1 {
				return sample.TAny, fmt.Errorf("size must be positive, got %d", v)
			}
			dims[k] = v
		}
	}
	c := -1
	if len(img.Shape) == 3 {
		c = img.Shape[2]
	}
	return sample.TensorOf(img.DType, dims[0], dims[1], c), nil
}

// decodeResizeFunc is the fused decode and resize the optimizer writes in
// place of resize(decode_image(...)), with or without to_float, so that the
// decoder can scale in the DCT (imageops.ScaleHintFor).
func decodeResizeFunc(name, sig string, dt tensor.DType,
	run func([]byte, int, int, int, string, imageops.DecodeOptions) (*tensor.Tensor, error)) *Func {
	return &Func{
		Name: name, Signature: sig,
		MinArgs: 4, MaxArgs: 5,
		Returns: tensorPtr, // Check: the fusion's
		Impl: func(_ *Call, a []any) (any, error) {
			data, c, opts, done, err := decodeArgs(a[:2])
			if err != nil {
				return nil, err
			}
			defer done()
			h, w, err := hw(a, 2, dt, c)
			if err != nil {
				return nil, fmt.Errorf("resize: %w", err) // the caret points at decode_image
			}
			m, err := method(a, 4)
			if err != nil {
				return nil, fmt.Errorf("resize: %w", err)
			}
			opts.ScaleHint = imageops.ScaleHintFor(h, w, m)
			return run(data, c, h, w, m, opts)
		},
	}
}

func decodeArgs(a []any) ([]byte, int, imageops.DecodeOptions, func(), error) {
	var opts imageops.DecodeOptions
	done := func() {}
	var data []byte
	switch x := a[0].(type) {
	case []byte:
		data = x
	case *pooledFile:
		data, done = x.data, x.release
	default:
		return nil, 0, opts, done, fmt.Errorf("decode_image: argument 1 must be bytes, got %s", typeName(a[0]))
	}
	c, ok := toInt(a[1])
	if !ok {
		done()
		return nil, 0, opts, func() {}, fmt.Errorf("decode_image: channels must be an integer, got %s", typeName(a[1]))
	}
	if len(a) > 2 {
		mp, ok := toInt(a[2])
		if !ok {
			done()
			return nil, 0, opts, func() {}, fmt.Errorf("decode_image: max_pixels must be an integer, got %s", typeName(a[2]))
		}
		opts.MaxPixels = mp
	}
	return data, int(c), opts, done, nil
}

// hw reads the height and width at a[i] and a[i+1] of a result of c
// channels of dt, which must fit the run (sizeFits): they may come from a
// sample.
func hw(a []any, i int, dt tensor.DType, c int) (int, int, error) {
	h, ok1 := toInt(a[i])
	w, ok2 := toInt(a[i+1])
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("height and width must be integers, got %s and %s", typeName(a[i]), typeName(a[i+1]))
	}
	if c <= 0 {
		c = 4 // channels as stored: at most 4
	}
	if h > 0 && w > 0 {
		if err := sizeFits(dt, int(h), int(w), c); err != nil {
			return 0, 0, fmt.Errorf("height %d and width %d: %w", h, w, err)
		}
	}
	return int(h), int(w), nil
}

func imgHW(a []any) (*tensor.Tensor, int, int, error) {
	img, err := imageIn(a, 0)
	if err != nil {
		return nil, 0, 0, err
	}
	c := 1
	if len(img.Shape) == 3 {
		c = img.Shape[2]
	}
	h, w, err := hw(a, 1, img.DType, c)
	return img, h, w, err
}

// method is resize's optional method argument, "" where it is left out.
// The checker passes a value typed only at run time (a field of JSON
// lines): anything but a string is refused here, not read as bilinear.
func method(a []any, i int) (string, error) {
	if i >= len(a) {
		return "", nil
	}
	s, ok := a[i].(string)
	if !ok {
		return "", fmt.Errorf("%w: method must be a string, got %s", imageops.ErrArgument, typeName(a[i]))
	}
	return s, nil
}

func scales(a []any, i int) (float64, float64, error) {
	lo, hi := imageops.DefaultMinScale, imageops.DefaultMaxScale
	var ok bool
	if i < len(a) {
		if lo, ok = toFloat(a[i]); !ok {
			return 0, 0, fmt.Errorf("min_scale must be a number, got %s", typeName(a[i]))
		}
	}
	if i+1 < len(a) {
		if hi, ok = toFloat(a[i+1]); !ok {
			return 0, 0, fmt.Errorf("max_scale must be a number, got %s", typeName(a[i+1]))
		}
	}
	// Checked again here for values read from fields, which validate
	// cannot see: a window drawn from them would be no crop at all.
	if lo <= 0 || hi > 1 || lo > hi || math.IsNaN(lo) || math.IsNaN(hi) {
		return 0, 0, fmt.Errorf("scale range [%v, %v] must satisfy 0 < min_scale <= max_scale <= 1", lo, hi)
	}
	return lo, hi, nil
}

func scaleConsts(a []Arg, i int) (float64, float64, bool) {
	lo, hi := imageops.DefaultMinScale, imageops.DefaultMaxScale
	if i < len(a) {
		v, ok := constFloat(a[i])
		if !ok {
			return 0, 0, false
		}
		lo = v
	}
	if i+1 < len(a) {
		v, ok := constFloat(a[i+1])
		if !ok {
			return 0, 0, false
		}
		hi = v
	}
	return lo, hi, true
}

func constFloat(a Arg) (float64, bool) {
	if !a.IsConst {
		return 0, false
	}
	return toFloat(a.Const)
}

// oneOr says how many per-channel values fit n channels: "1 or 3", or
// just "1" for one channel.
func oneOr(n int) string {
	if n == 1 {
		return "1"
	}
	return fmt.Sprintf("1 or %d", n)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// finiteNormalize refuses a mean or std (argument i) that
// normalize's float32 arithmetic would turn into infinities or NaNs in
// every pixel: one beyond float32's range, or a std of 0 or one so small
// that its reciprocal, by which normalize multiplies, overflows (1e-50 is
// 0 as a float32, and was said to be 0).
func finiteNormalize(i int, v any) error {
	l, ok := v.([]any)
	if !ok {
		l = []any{v}
	}
	name := []string{"", "mean", "std"}[i]
	for _, e := range l {
		f, ok := toFloat(e)
		if !ok {
			continue
		}
		f32 := float32(f)
		switch {
		case i == 2 && f == 0:
			return fmt.Errorf("std must not be 0")
		case math.IsNaN(f):
			return fmt.Errorf("%s is NaN (not a number)", name)
		case math.IsInf(float64(f32), 0):
			return fmt.Errorf("%s %g is beyond float32's range (±3.4e38)", name, f)
		case i == 2 && math.IsInf(float64(1/f32), 0):
			return fmt.Errorf("std %g is too small for float32: its reciprocal, which normalize multiplies by, overflows (the least is about 3e-39)", f)
		}
	}
	return nil
}

func floatList(v any) ([]float32, bool) {
	if f, ok := toFloat(v); ok {
		return []float32{float32(f)}, true
	}
	l, ok := v.([]any)
	if !ok || len(l) == 0 {
		return nil, false
	}
	out := make([]float32, len(l))
	for i, e := range l {
		f, ok := toFloat(e)
		if !ok {
			return nil, false
		}
		out[i] = float32(f)
	}
	return out, true
}

func intList(v any) ([]int, bool) {
	l, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]int, len(l))
	for i, e := range l {
		n, ok := toInt(e)
		if !ok {
			return nil, false
		}
		out[i] = int(n)
	}
	return out, true
}
