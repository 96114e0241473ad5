package imageops

import (
	"bytes"
	"errors"
	"fmt"
	"image/png"
	"io"

	"github.com/piperun/piperun/tensor"
)

// DefaultMaxPixels is the pixel limit Decode applies when
// DecodeOptions.MaxPixels is 0. It is PIL's MAX_IMAGE_PIXELS, so a file PIL
// opens without a DecompressionBombWarning decodes here too.
const DefaultMaxPixels int64 = 178956970

// ScaleHintFactor is how much larger than its target a fused decode keeps
// the image when it shrinks in the DCT domain, where the resize after it
// is bilinear or bicubic. libjpeg's scaled IDCT filters unlike the
// antialiased resize, so the more it shrinks the more the result departs
// from a full-resolution decode: over the shared photos, a mean 1.36
// levels at a 64×64 bilinear target with a factor of 2 (1.56 bicubic,
// beyond the 1.5 the resize accuracy allows), 0.77 with 4 (0.89 bicubic);
// at 128, 1.26 and 0.05; at 224, 0.07 and 0.002.
const ScaleHintFactor = 4

// ScaleHintFor is the DCT scale hint for a fused decode resized to h×w by
// method: none for "nearest" and "area", whose results a DCT-domain shrink
// changes most (a mean 9.3 and 3.0 levels at 64×64 with a factor of 2,
// 6.7 and 1.6 with 4), so they decode at full size and match the unfused
// chain exactly.
func ScaleHintFor(h, w int, method string) Size {
	if method == Nearest || method == Area {
		return Size{}
	}
	return Size{H: ScaleHintFactor * h, W: ScaleHintFactor * w}
}

// Rect is a window of an image in pixels: rows Y..Y+H-1, columns X..X+W-1.
type Rect struct {
	Y, X, H, W int
}

// Size is a height and width in pixels.
type Size struct {
	H, W int
}

// DecodeOptions tunes Decode. The zero value decodes the whole image at full
// resolution with the default pixel limit and strict error handling.
type DecodeOptions struct {
	// MaxPixels refuses images whose header declares more pixels, before any
	// pixel buffer is allocated; 0 means DefaultMaxPixels, negative means no
	// limit.
	MaxPixels int64
	// ScaleHint is the size the caller will resize the result (or the Crop
	// window) to. When set, the JPEG decoder may scale in the DCT domain by
	// num/8 (1/8 to 7/8; e.g. 5/8 takes a 500×375 photo to 313×235 for a
	// 224×224 target), never producing fewer rows or columns than the hint,
	// so the result can be smaller than the full-resolution image. PNG and
	// the pure-Go JPEG decoder ignore it.
	ScaleHint Size
	// Crop, when set, selects a window of the upright (EXIF-rotated) image
	// at full-resolution coordinates. With a ScaleHint the window is scaled
	// with the image: its bounds are rounded outwards.
	Crop *Rect
	// Lenient accepts damage that a decoder can paper over: a JPEG with no
	// end-of-image marker (truncated, the missing part is grey) and the
	// corrupt-data warnings of libjpeg. The default refuses them, because a
	// silently grey half-image is a wrong training sample.
	Lenient bool
	// hpassTo, set by the fused DecodeResize, is the width its resize
	// will take the image to with the filter hpassMethod: an RGB JPEG
	// whose rows the packed pass can resample is then decoded with that
	// pass applied as libjpeg delivers the rows (hpassDecoder), and comes
	// back hpassTo wide.
	hpassTo     int
	hpassMethod string
}

func (o *DecodeOptions) maxPixels() int64 {
	switch {
	case o.MaxPixels == 0:
		return DefaultMaxPixels
	case o.MaxPixels < 0:
		return 1<<63 - 1
	}
	return o.MaxPixels
}

// Config describes an encoded image as Decode would return it.
type Config struct {
	// Format is "jpeg" or "png".
	Format string
	// Height and Width are the upright size, after EXIF orientation.
	Height, Width int
	// Channels is the channel count Decode returns for channels = 0.
	Channels int
	// Orientation is the EXIF orientation (1-8) that Decode applies.
	Orientation int
}

// DecodeConfig reads only the header of an encoded image. A caller uses it
// to pick a crop window (RandomResizedCropWindow) before decoding.
func DecodeConfig(data []byte) (Config, error) {
	switch {
	case bytes.HasPrefix(data, jpegMagic):
		info, err := scanJPEG(data)
		if err != nil {
			return Config{}, fmt.Errorf("imageops: decode: %w", err)
		}
		h, w := orientedSize(info.height, info.width, info.orientation)
		c := 3
		if info.components == 1 {
			c = 1
		}
		return Config{Format: "jpeg", Height: h, Width: w, Channels: c, Orientation: info.orientation}, nil
	case bytes.HasPrefix(data, pngMagic):
		info, err := scanPNG(data)
		if err != nil {
			return Config{}, fmt.Errorf("imageops: decode: %w", err)
		}
		return Config{Format: "png", Height: info.height, Width: info.width, Channels: info.channels(), Orientation: 1}, nil
	}
	return Config{}, fmt.Errorf("imageops: decode: %w", formatErr(data))
}

// formatErr says why data is no image this package reads: an empty file
// is worth telling apart from one in another format.
func formatErr(data []byte) error {
	if len(data) == 0 {
		return fmt.Errorf("%w: the image bytes are empty (0 bytes: an empty file, or an empty feature)", ErrFormat)
	}
	return fmt.Errorf("%w (want jpeg or png)", ErrFormat)
}

// Decode decodes a JPEG or PNG into a uint8 [H, W, C] tensor, upright after
// EXIF orientation. channels 0 keeps the stored channels (1 for grayscale,
// 2 for PNG gray with alpha, 3 for color, 4 for PNG color or palette with
// alpha), 1 converts to grayscale, 3 to RGB and 4 to RGBA (opaque when the
// file has no alpha).
//
// Errors wrap ErrFormat, ErrTooLarge, ErrUnsupported (12-bit, arithmetic,
// lossless JPEG), ErrCorrupt or ErrTruncated, and name the reason.
func Decode(data []byte, channels int, opts DecodeOptions) (*tensor.Tensor, error) {
	return decode(data, channels, &opts, backend{defaultJPEG, windowJPEG, nil}, makeBytes)
}

// DecodePureGo is Decode with Go's image/jpeg instead of libjpeg-turbo. It
// is what Decode uses in builds without cgo; it is exported so tests and
// benchmarks can compare the two decoders in one binary. It ignores
// ScaleHint.
func DecodePureGo(data []byte, channels int, opts DecodeOptions) (*tensor.Tensor, error) {
	return decode(data, channels, &opts, backend{full: goJPEG}, makeBytes)
}

func makeBytes(n int) []byte { return make([]byte, n) }

// jpegDecoder decodes the stored (unrotated) image scaled by num/8 into a
// buffer from alloc with ch interleaved channels (1, 3 or 4). A decoder that
// cannot scale ignores num; it reports the size it produced.
type jpegDecoder func(data []byte, info *jpegInfo, ch, num int, alloc func(int) []byte, lenient bool) (pix []byte, h, w int, err error)

// windowDecoder decodes only window r (in scaled stored coordinates) of a
// JPEG scaled by num/8; nil where the backend cannot.
type windowDecoder func(data []byte, info *jpegInfo, ch, num int, r Rect, alloc func(int) []byte, lenient bool) ([]byte, error)

// hpassDecoder decodes the stored image scaled by num/8 as RGB, resampling
// each row to ow pixels with cf's packed 13-bit weights as it comes, into a
// buffer from alloc (h rows of ow*3 bytes): byte for byte what the resize's
// horizontal pass makes of the decoded frame, without holding the frame.
// nil where the backend cannot.
type hpassDecoder func(data []byte, info *jpegInfo, num, ow int, cf *coeffs, alloc func(int) []byte, lenient bool) (pix []byte, h int, err error)

// backend is the JPEG decoders of a build.
type backend struct {
	full   jpegDecoder
	window windowDecoder
	hpass  hpassDecoder
}

func decode(data []byte, channels int, opts *DecodeOptions, be backend, alloc func(int) []byte) (*tensor.Tensor, error) {
	t, err := decodeInner(data, channels, opts, be, alloc)
	if err != nil {
		return nil, fmt.Errorf("imageops: decode: %w", err)
	}
	return t, nil
}

func checkChannels(channels int) error {
	switch channels {
	case 0, 1, 3, 4:
		return nil
	}
	return fmt.Errorf("%w: channels %d (want 0, 1, 3 or 4)", ErrArgument, channels)
}

func checkPixels(h, w int, limit int64) error {
	if int64(h)*int64(w) > limit {
		return fmt.Errorf("%w: %dx%d (width×height) is %d pixels, over the limit of %d", ErrTooLarge, w, h, int64(h)*int64(w), limit)
	}
	return nil
}

func checkWindow(r *Rect, h, w int) error {
	if r.H <= 0 || r.W <= 0 || r.Y < 0 || r.X < 0 || r.Y+r.H > h || r.X+r.W > w {
		return fmt.Errorf("%w: crop window y=%d x=%d h=%d w=%d outside the %d×%d (height×width) image", ErrArgument, r.Y, r.X, r.H, r.W, h, w)
	}
	return nil
}

func decodeInner(data []byte, channels int, opts *DecodeOptions, be backend, alloc func(int) []byte) (*tensor.Tensor, error) {
	if err := checkChannels(channels); err != nil {
		return nil, err
	}
	switch {
	case bytes.HasPrefix(data, jpegMagic):
		return decodeJPEG(data, channels, opts, be, alloc)
	case bytes.HasPrefix(data, pngMagic):
		return decodePNG(data, channels, opts, alloc)
	}
	return nil, formatErr(data)
}

// pickScale returns the smallest DCT scaling factor num/8 (libjpeg-turbo
// scales by 1/8 to 8/8 in steps of 1/8) that keeps a region of rh×rw at
// least hint in both dimensions; 8 means no scaling.
func pickScale(rh, rw int, hint Size) int {
	if hint.H <= 0 || hint.W <= 0 {
		return 8
	}
	for num := 1; num < 8; num++ {
		if rh*num >= hint.H*8 && rw*num >= hint.W*8 {
			return num
		}
	}
	return 8
}

// scaled is libjpeg's size of a dimension scaled by num/8 (rounded up).
func scaled(dim, num int) int { return (dim*num + 7) / 8 }

func decodeJPEG(data []byte, channels int, opts *DecodeOptions, be backend, alloc func(int) []byte) (*tensor.Tensor, error) {
	jd, wd := be.full, be.window
	info, err := scanJPEG(data)
	if err != nil {
		return nil, err
	}
	if err := checkPixels(info.height, info.width, opts.maxPixels()); err != nil {
		return nil, err
	}
	if !info.hasEOI && !opts.Lenient {
		return nil, fmt.Errorf("%w: jpeg has no end-of-image marker", ErrTruncated)
	}
	ch := channels
	if ch == 0 {
		ch = 3
		if info.components == 1 {
			ch = 1
		}
	}
	uh, uw := orientedSize(info.height, info.width, info.orientation)
	region := Rect{H: uh, W: uw}
	if opts.Crop != nil {
		if err := checkWindow(opts.Crop, uh, uw); err != nil {
			return nil, err
		}
		region = *opts.Crop
	}
	num := pickScale(region.H, region.W, opts.ScaleHint)
	// The frame libjpeg writes, in as many channels as the file has (CMYK
	// is converted after), and a second one to turn it upright.
	per := int64(max(ch, info.components))
	if info.orientation != 1 {
		per *= 2
	}
	release, err := acquireDecode(scaled(region.H, num), scaled(region.W, num), per)
	if err != nil {
		return nil, err
	}
	defer release()
	if opts.Crop != nil && info.orientation == 1 && info.components != 4 && wd != nil {
		sh, sw := scaled(info.height, num), scaled(info.width, num)
		r := scaleRect(region, num, sh, sw)
		pix, err := wd(data, &info, ch, num, r, alloc, opts.Lenient)
		if err != nil {
			return nil, err
		}
		return &tensor.Tensor{DType: tensor.Uint8, Shape: []int{r.H, r.W, ch}, Data: pix}, nil
	}
	final := info.orientation == 1 && opts.Crop == nil
	if final && opts.hpassTo > 0 && be.hpass != nil && ch == 3 && info.components != 4 {
		// A fused resize's horizontal pass runs as the rows are decoded: a
		// decoder then holds 16 rows of the frame instead of all of it
		// (W1: 6.5 MiB of frames for two decoders, a 3 MB one the first
		// time both hold a photo over 2 MB, late in a run). Weights with
		// negative taps (bicubic) have no packed pass and keep the frame.
		sw := scaled(info.width, num)
		if f, ok := filters[opts.hpassMethod]; ok && sw != opts.hpassTo {
			if cf := cachedCoeffs(sw, opts.hpassTo, opts.hpassMethod, f, true); cf.w13 != nil {
				pix, sh, err := be.hpass(data, &info, num, opts.hpassTo, cf, alloc, opts.Lenient)
				if err != nil {
					return nil, err
				}
				return &tensor.Tensor{DType: tensor.Uint8, Shape: []int{sh, opts.hpassTo, 3}, Data: pix}, nil
			}
		}
	}
	a := alloc
	if !final {
		a = defaultPool.Get
	}
	pix, sh, sw, err := jd(data, &info, ch, num, a, opts.Lenient)
	if err != nil {
		return nil, err
	}
	if final {
		return &tensor.Tensor{DType: tensor.Uint8, Shape: []int{sh, sw, ch}, Data: pix}, nil
	}
	if info.orientation != 1 {
		if opts.Crop == nil {
			a = alloc
		}
		rot, rh, rw := orient(pix, sh, sw, ch, info.orientation, a)
		defaultPool.Put(pix)
		pix, sh, sw = rot, rh, rw
		if opts.Crop == nil {
			return &tensor.Tensor{DType: tensor.Uint8, Shape: []int{sh, sw, ch}, Data: pix}, nil
		}
	}
	// The pure-Go decoder ignores num, so whether the window needs
	// scaling follows from the size it returned.
	if sh == uh && sw == uw {
		num = 8
	}
	r := scaleRect(region, num, sh, sw)
	out := cropBytes(pix, sh, sw, ch, r, alloc)
	defaultPool.Put(pix)
	return &tensor.Tensor{DType: tensor.Uint8, Shape: []int{r.H, r.W, ch}, Data: out}, nil
}

// scaleRect maps a full-resolution window onto an image scaled by num/8,
// rounding outwards so no selected pixel is lost.
func scaleRect(r Rect, num, h, w int) Rect {
	if num == 8 {
		return r
	}
	y0, x0 := r.Y*num/8, r.X*num/8
	y1, x1 := min(scaled(r.Y+r.H, num), h), min(scaled(r.X+r.W, num), w)
	return Rect{Y: y0, X: x0, H: max(y1-y0, 1), W: max(x1-x0, 1)}
}

// cropBytes copies a window of an interleaved uint8 image.
func cropBytes(pix []byte, h, w, c int, r Rect, alloc func(int) []byte) []byte {
	out := alloc(r.H * r.W * c)
	row := r.W * c
	for y := 0; y < r.H; y++ {
		s := ((r.Y+y)*w + r.X) * c
		copy(out[y*row:(y+1)*row], pix[s:s+row])
	}
	return out
}

func decodePNG(data []byte, channels int, opts *DecodeOptions, alloc func(int) []byte) (*tensor.Tensor, error) {
	info, err := scanPNG(data)
	if err != nil {
		return nil, err
	}
	if err := checkPixels(info.height, info.width, opts.maxPixels()); err != nil {
		return nil, err
	}
	if opts.Crop != nil {
		if err := checkWindow(opts.Crop, info.height, info.width); err != nil {
			return nil, err
		}
	}
	// image/png's own image (8 bytes a pixel at 16 bits, at most 4 below)
	// and the tensor it is copied into.
	per := int64(4)
	if info.bitDepth == 16 {
		per = 8
	}
	outCh := int64(channels)
	if outCh == 0 {
		outCh = int64(info.channels())
	}
	release, err := acquireDecode(info.height, info.width, per+outCh)
	if err != nil {
		return nil, err
	}
	defer release()
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		// The library's error is kept as text (%v), not wrapped: an
		// io.EOF inside a decode error must not read as a stream's end
		// to a caller's errors.Is; the sentinel says what kind it was.
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
			return nil, fmt.Errorf("%w: png: %v", ErrTruncated, err)
		case isUnsupported(err):
			return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
		case !bytes.Contains(data[len(pngMagic):], pngIEND):
			// A file cut inside its pixel data fails as "not enough
			// pixel data", as if corrupt; with no IEND chunk it was cut
			// (a cut PNG was "truncated" or "corrupt"
			// depending on where it was cut). An IEND anywhere, even
			// with a wrong CRC or bytes after it, means damage, not a
			// cut.
			return nil, fmt.Errorf("%w: png has no IEND chunk (%v)", ErrTruncated, err)
		}
		// image/png's own errors already start with "png:".
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	ch := channels
	if ch == 0 {
		ch = info.channels()
	}
	b := img.Bounds()
	h, w := b.Dy(), b.Dx()
	a := alloc
	if opts.Crop != nil {
		a = defaultPool.Get
	}
	pix := a(h * w * ch)
	if err := imageToHWC(img, pix, ch); err != nil {
		return nil, err
	}
	if opts.Crop == nil {
		return &tensor.Tensor{DType: tensor.Uint8, Shape: []int{h, w, ch}, Data: pix}, nil
	}
	r := *opts.Crop
	out := cropBytes(pix, h, w, ch, r, alloc)
	defaultPool.Put(pix)
	return &tensor.Tensor{DType: tensor.Uint8, Shape: []int{r.H, r.W, ch}, Data: out}, nil
}

func isUnsupported(err error) bool {
	var pu png.UnsupportedError
	return errors.As(err, &pu)
}
