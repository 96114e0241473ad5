package imageops

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"
	"unsafe"

	"github.com/piperun/piperun/tensor"
)

// Resize methods.
const (
	Bilinear = "bilinear"
	Nearest  = "nearest"
	Area     = "area"
	Bicubic  = "bicubic"
)

// precisionBits is the fixed-point precision of uint8 weights, PIL's choice:
// 8 bits of sample times 22 bits of weight plus two bits of headroom for
// bicubic overshoot fit an int32 accumulator.
const precisionBits = 22

type filter struct {
	support float64
	fn      func(x float64) float64
}

var filters = map[string]filter{
	Bilinear: {1, func(x float64) float64 {
		x = math.Abs(x)
		if x < 1 {
			return 1 - x
		}
		return 0
	}},
	Area: {0.5, func(x float64) float64 {
		if x > -0.5 && x <= 0.5 {
			return 1
		}
		return 0
	}},
	Bicubic: {2, func(x float64) float64 {
		// Keys cubic with a = -0.5, as PIL and TensorFlow use.
		const a = -0.5
		x = math.Abs(x)
		switch {
		case x < 1:
			return ((a+2)*x-(a+3))*x*x + 1
		case x < 2:
			return (((x-5)*x+8)*x - 4) * a
		}
		return 0
	}},
}

// coeffs holds the taps of one axis: output i reads count[i] inputs from
// start[i], with weights at [i*stride, i*stride+count[i]).
type coeffs struct {
	start, count []int32
	stride       int
	wi           []int32   // fixed-point weights for uint8
	wf           []float32 // weights for float32
	end          int       // max(start[i] + count[i]): the inputs read
	// w13 are 13-bit weights for the packed three-channel pass and for
	// vpass13, set only when no weight is negative (bilinear, area),
	// which both need.
	w13 []uint64
	// w16 holds w13 again as the C pass's AVX2 loop reads them: per
	// output, groups16 groups of 16 int16s, each four taps as
	// (w0 w1 w0 w1 w0 w1 0 0 | w2 w3 w2 w3 w2 w3 0 0), zero past count.
	w16      []int16
	groups16 int
}

// makeCoeffs computes antialiased resampling weights the way PIL's
// precompute_coeffs does: when shrinking, the filter is stretched by the
// scale so every input pixel contributes (antialiasing); pixel centres sit
// at half-integers.
func makeCoeffs(in, out int, f filter, fixed bool) *coeffs {
	scale := float64(in) / float64(out)
	fscale := math.Max(scale, 1)
	support := f.support * fscale
	stride := int(math.Ceil(support))*2 + 1
	c := &coeffs{start: make([]int32, out), count: make([]int32, out), stride: stride}
	wf := make([]float64, stride)
	if fixed {
		c.wi = make([]int32, out*stride)
	} else {
		c.wf = make([]float32, out*stride)
	}
	nonneg := fixed
	for i := 0; i < out; i++ {
		center := (float64(i) + 0.5) * scale
		lo := max(int(center-support+0.5), 0)
		hi := min(int(center+support+0.5), in)
		n := min(hi-lo, stride)
		sum := 0.0
		for k := 0; k < n; k++ {
			w := f.fn((float64(k+lo) - center + 0.5) / fscale)
			wf[k] = w
			sum += w
		}
		c.start[i], c.count[i] = int32(lo), int32(n)
		c.end = max(c.end, lo+n)
		for k := 0; k < n; k++ {
			w := wf[k]
			if sum != 0 {
				w /= sum
			}
			if fixed {
				// Round half away from zero, as PIL does, so weights of a
				// symmetric filter stay symmetric.
				c.wi[i*stride+k] = int32(math.Round(w * (1 << precisionBits)))
				nonneg = nonneg && w >= 0
			} else {
				c.wf[i*stride+k] = float32(w)
			}
		}
	}
	if nonneg && !c.reround13(out, stride) {
		c.w13 = nil // use the 22-bit path
	}
	if c.w13 != nil {
		c.groups16 = (stride + 3) / 4
		c.w16 = make([]int16, out*c.groups16*16)
		for i := 0; i < out; i++ {
			for k := 0; k < int(c.count[i]); k++ {
				g := c.w16[(i*c.groups16+k/4)*16:][:16]
				lane := 8*(k/2%2) + k%2 // the 128-bit half, then the pixel of the pair
				w := int16(c.w13[i*stride+k])
				g[lane], g[lane+2], g[lane+4] = w, w, w
			}
		}
	}
	return c
}

// reround13 rounds the weights to 13 bits so each output's sum to exactly
// 2^13, keeping flat areas exact: each weight is its exact value rounded
// down, and the taps with the largest fractions left get one more, until
// the sum is made (the largest-remainder method), so no weight is a unit
// or more from its share. The largest tap took all the rounding before: a
// shrink of 1000 taps gave one of them 26 times its share (a white row in
// a thousand black ones came out 6 levels bright). False where the
// weights cannot make the sum (thousands of tiny taps).
func (c *coeffs) reround13(out, stride int) bool {
	c.w13 = make([]uint64, out*stride)
	frac := make([]float64, stride)
	order := make([]int, stride)
	for i := 0; i < out; i++ {
		n := int(c.count[i])
		w := c.w13[i*stride:][:n]
		var sum int64
		for k := range w {
			exact := float64(c.wi[i*stride+k]) / (1 << (precisionBits - swarBits))
			fl := math.Floor(exact)
			w[k], frac[k], order[k] = uint64(fl), exact-fl, k
			sum += int64(fl)
		}
		left := int64(1<<swarBits) - sum
		if left < 0 || left > int64(n) {
			return false
		}
		// The ties go to the lower index.
		slices.SortStableFunc(order[:n], func(a, b int) int { return cmp.Compare(frac[b], frac[a]) })
		for _, k := range order[:left] {
			w[k]++
		}
	}
	return true
}

// coeffCache keeps the weights of recent resizes, which are read-only once
// made: a pipeline shrinks thousands of images from a few hundred distinct
// sizes to one target, and making the weights anew took about 1 % of W1's
// CPU and a burst of small allocations per image. Random crops make nearly
// every size distinct, so the cache is bounded by bytes and simply emptied
// when full.
var coeffCache struct {
	sync.RWMutex
	m     map[coeffKey]*coeffs
	bytes int
}

type coeffKey struct {
	in, out int
	method  string
	fixed   bool
}

// coeffCacheBytes bounds the weights coeffCache holds.
const coeffCacheBytes = 4 << 20

// cachedCoeffs returns makeCoeffs(in, out, f, fixed), f being method's
// filter, from the cache when it can.
func cachedCoeffs(in, out int, method string, f filter, fixed bool) *coeffs {
	k := coeffKey{in, out, method, fixed}
	coeffCache.RLock()
	c := coeffCache.m[k]
	coeffCache.RUnlock()
	if c != nil {
		return c
	}
	c = makeCoeffs(in, out, f, fixed)
	n := 4*(len(c.start)+len(c.count)+len(c.wi)+len(c.wf)) + 8*len(c.w13) + 2*len(c.w16)
	coeffCache.Lock()
	defer coeffCache.Unlock()
	if coeffCache.m == nil || coeffCache.bytes+n > coeffCacheBytes {
		coeffCache.m, coeffCache.bytes = map[coeffKey]*coeffs{}, 0
	}
	coeffCache.m[k] = c
	coeffCache.bytes += n
	return c
}

// Resize resamples an HWC image (uint8 or float32, any channel count) to
// h×w. method is "bilinear" (also ""), "nearest", "area" or "bicubic".
// Except for nearest, shrinking is antialiased like PIL and
// tf.image.resize(antialias=True). uint8 results are rounded and clamped.
// The uint8 results match PIL's Image.resize: bit-exact for bicubic and
// area, and for bilinear within a few hundredths of a level on average,
// because its RGB horizontal pass packs the three channels into one
// integer with 13-bit weights.
func Resize(img *tensor.Tensor, h, w int, method string) (*tensor.Tensor, error) {
	out, err := resize(img, h, w, method, nil)
	if err != nil {
		return nil, fmt.Errorf("imageops: resize: %w", err)
	}
	return out, nil
}

func checkImage(img *tensor.Tensor) (h, w, c int, err error) {
	if img == nil || len(img.Shape) != 3 {
		return 0, 0, 0, fmt.Errorf("%w: want an HWC image of rank 3, got %v", ErrArgument, shapeOf(img))
	}
	if img.DType != tensor.Uint8 && img.DType != tensor.Float32 {
		return 0, 0, 0, fmt.Errorf("%w: want a uint8 or float32 image, got %s", ErrArgument, img.DType)
	}
	h, w, c = img.Shape[0], img.Shape[1], img.Shape[2]
	if h <= 0 || w <= 0 || c <= 0 || len(img.Data) < h*w*c*img.DType.Size() {
		return 0, 0, 0, fmt.Errorf("%w: empty or inconsistent image %v", ErrArgument, img.Shape)
	}
	return h, w, c, nil
}

func shapeOf(t *tensor.Tensor) string {
	if t == nil {
		return "nil"
	}
	return t.String()
}

// resize resamples img to oh×ow into a buffer from alloc, or, with a nil
// alloc, into a recyclable tensor (tensor.Alloc) for the caller to return.
func resize(img *tensor.Tensor, oh, ow int, method string, alloc func(int) []byte) (*tensor.Tensor, error) {
	ih, iw, c, err := checkImage(img)
	if err != nil {
		return nil, err
	}
	if oh <= 0 || ow <= 0 {
		return nil, fmt.Errorf("%w: a %d×%d (height×width) resize: sizes must be positive", ErrArgument, oh, ow)
	}
	if method == "" {
		method = Bilinear
	}
	es := img.DType.Size()
	var out *tensor.Tensor
	if alloc == nil {
		out = tensor.Alloc(img.DType, oh, ow, c)
	} else {
		out = &tensor.Tensor{DType: img.DType, Shape: []int{oh, ow, c}, Data: alloc(oh * ow * c * es)}
	}
	if method == Nearest {
		resizeNearest(img.Data, ih, iw, c*es, out.Data, oh, ow)
		return out, nil
	}
	f, ok := filters[method]
	if !ok {
		return nil, fmt.Errorf("%w: resize method %q (want bilinear, nearest, area or bicubic)", ErrArgument, method)
	}
	if ih == oh && iw == ow {
		copy(out.Data, img.Data)
		return out, nil
	}
	fixed := img.DType == tensor.Uint8
	// Horizontal pass first, into a pooled intermediate of ih×ow, as PIL
	// does; an axis whose size does not change is skipped.
	src := img.Data[:ih*iw*c*es]
	var tmp []byte
	if iw != ow {
		cx := cachedCoeffs(iw, ow, method, f, fixed)
		dst := out.Data
		if ih != oh {
			tmp = defaultPool.Get(ih * ow * c * es)
			dst = tmp
		}
		if fixed {
			hpass8(src, ih, iw, c, dst, ow, cx)
		} else {
			hpassF(bytesAsF32(src), ih, iw, c, bytesAsF32(dst), ow, cx)
		}
		src = dst
	}
	if ih != oh {
		cy := cachedCoeffs(ih, oh, method, f, fixed)
		switch {
		case fixed && cy.w13 != nil:
			vpass13Fast(src, ow*c, out.Data, oh, cy)
		case fixed:
			vpass8Fast(src, ow*c, out.Data, oh, cy)
		default:
			vpassF(bytesAsF32(src), ow*c, bytesAsF32(out.Data), oh, cy)
		}
	}
	if tmp != nil {
		defaultPool.Put(tmp)
	}
	return out, nil
}

// resizeNearest picks source pixel floor((i+0.5)*scale) for output i on each
// axis, PIL's NEAREST, except where (i+0.5)*scale is exactly an integer: PIL's
// fixed point lands just below it, one pixel before; px is the pixel size in
// bytes.
func resizeNearest(src []byte, ih, iw, px int, dst []byte, oh, ow int) {
	xs := make([]int, ow)
	for x := range xs {
		xs[x] = min(int((float64(x)+0.5)*float64(iw)/float64(ow)), iw-1) * px
	}
	for y := 0; y < oh; y++ {
		sy := min(int((float64(y)+0.5)*float64(ih)/float64(oh)), ih-1)
		srow := src[sy*iw*px : (sy+1)*iw*px]
		drow := dst[y*ow*px : (y+1)*ow*px]
		for x, sx := range xs {
			copy(drow[x*px:x*px+px], srow[sx:sx+px])
		}
	}
}

func clamp8(v int32) uint8 {
	v >>= precisionBits
	if uint32(v) > 255 {
		if v < 0 {
			return 0
		}
		return 255
	}
	return uint8(v)
}

const half = 1 << (precisionBits - 1)

// hpass8 resamples each row of a uint8 image along x. The channel counts
// that matter (3, 1, 4) get loops with their accumulators in registers.
func hpass8(src []byte, h, iw, c int, dst []byte, ow int, cf *coeffs) {
	y0 := 0
	if c == 3 && cf.w13 != nil {
		hpass3PackedFast(src, h, iw, dst, ow, cf)
		return
	}
	if c == 3 {
		// Two rows per sweep share each weight load and loop step.
		for ; y0+1 < h; y0 += 2 {
			hrow3x2(src[y0*iw*3:(y0+2)*iw*3], iw*3, dst[y0*ow*3:(y0+2)*ow*3], ow*3, ow, cf)
		}
	}
	for y := y0; y < h; y++ {
		srow := src[y*iw*c : (y+1)*iw*c]
		drow := dst[y*ow*c : (y+1)*ow*c]
		switch c {
		case 3:
			hrow3(srow, drow, ow, cf)
		case 1:
			for x := 0; x < ow; x++ {
				s, n := int(cf.start[x]), int(cf.count[x])
				ws := cf.wi[x*cf.stride : x*cf.stride+n]
				p := srow[s : s+n]
				v := int32(half)
				for k, w := range ws {
					v += int32(p[k]) * w
				}
				drow[x] = clamp8(v)
			}
		case 4:
			for x := 0; x < ow; x++ {
				s, n := int(cf.start[x]), int(cf.count[x])
				ws := cf.wi[x*cf.stride : x*cf.stride+n]
				p := srow[s*4 : (s+n)*4]
				r, g, b, a := int32(half), int32(half), int32(half), int32(half)
				for k, w := range ws {
					q := p[4*k : 4*k+4 : 4*k+4]
					r += int32(q[0]) * w
					g += int32(q[1]) * w
					b += int32(q[2]) * w
					a += int32(q[3]) * w
				}
				d := drow[4*x : 4*x+4 : 4*x+4]
				d[0], d[1], d[2], d[3] = clamp8(r), clamp8(g), clamp8(b), clamp8(a)
			}
		default:
			for x := 0; x < ow; x++ {
				s, n := int(cf.start[x]), int(cf.count[x])
				ws := cf.wi[x*cf.stride : x*cf.stride+n]
				for ch := 0; ch < c; ch++ {
					v := int32(half)
					for k, w := range ws {
						v += int32(srow[(s+k)*c+ch]) * w
					}
					drow[x*c+ch] = clamp8(v)
				}
			}
		}
	}
}

// vpass8 resamples along y. Each output row accumulates whole input rows
// into an int32 row buffer, so memory is walked sequentially.
func vpass8(src []byte, row int, dst []byte, oh int, cf *coeffs) {
	acc, accBuf := defaultPool.getI32(row)
	acc = acc[:row]
	for y := 0; y < oh; y++ {
		s, n := int(cf.start[y]), int(cf.count[y])
		ws := cf.wi[y*cf.stride : y*cf.stride+n]
		r0 := src[s*row : (s+1)*row]
		r0 = r0[:len(acc)]
		w0 := ws[0]
		for i, v := range r0 {
			acc[i] = half + int32(v)*w0
		}
		k := 1
		for ; k+1 < n; k += 2 {
			// Two input rows per sweep halve the accumulator traffic.
			ra := src[(s+k)*row : (s+k+1)*row]
			rb := src[(s+k+1)*row : (s+k+2)*row]
			ra, rb = ra[:len(acc)], rb[:len(acc)]
			wa, wb := ws[k], ws[k+1]
			for i := range acc {
				acc[i] += int32(ra[i])*wa + int32(rb[i])*wb
			}
		}
		d := dst[y*row : (y+1)*row]
		d = d[:len(acc)]
		if k < n {
			// Fold the last tap into the final pass.
			rk := src[(s+k)*row : (s+k+1)*row]
			rk = rk[:len(acc)]
			w := ws[k]
			for i, v := range acc {
				d[i] = clamp8(v + int32(rk[i])*w)
			}
		} else {
			for i, v := range acc {
				d[i] = clamp8(v)
			}
		}
	}
	defaultPool.Put(accBuf)
}

// vpass13 resamples along y with the 13-bit weights w13 (cf.w13 must be
// set): the horizontal pass's precision, and few enough bits that the C
// pass can multiply two input rows by their weights in one 16-bit
// multiply-add. Weights are non-negative and sum to 2^13, so an output
// never exceeds 255 and needs no clamp.
func vpass13(src []byte, row int, dst []byte, oh int, cf *coeffs) {
	acc, accBuf := defaultPool.getI32(row)
	acc = acc[:row]
	for y := 0; y < oh; y++ {
		s, n := int(cf.start[y]), int(cf.count[y])
		ws := cf.w13[y*cf.stride : y*cf.stride+n]
		r0 := src[s*row : (s+1)*row]
		r0 = r0[:len(acc)]
		w0 := int32(ws[0])
		for i, v := range r0 {
			acc[i] = 1<<(swarBits-1) + int32(v)*w0
		}
		for k := 1; k < n; k++ {
			rk := src[(s+k)*row : (s+k+1)*row]
			rk = rk[:len(acc)]
			w := int32(ws[k])
			for i, v := range rk {
				acc[i] += int32(v) * w
			}
		}
		d := dst[y*row : (y+1)*row]
		d = d[:len(acc)]
		for i, v := range acc {
			d[i] = uint8(v >> swarBits)
		}
	}
	defaultPool.Put(accBuf)
}

func hpassF(src []float32, h, iw, c int, dst []float32, ow int, cf *coeffs) {
	for y := 0; y < h; y++ {
		srow := src[y*iw*c : (y+1)*iw*c]
		drow := dst[y*ow*c : (y+1)*ow*c]
		if c == 3 {
			for x := 0; x < ow; x++ {
				s, n := int(cf.start[x]), int(cf.count[x])
				ws := cf.wf[x*cf.stride : x*cf.stride+n]
				p := srow[s*3 : (s+n)*3]
				var r, g, b float32
				for k, w := range ws {
					q := p[3*k : 3*k+3 : 3*k+3]
					r += q[0] * w
					g += q[1] * w
					b += q[2] * w
				}
				d := drow[3*x : 3*x+3 : 3*x+3]
				d[0], d[1], d[2] = r, g, b
			}
			continue
		}
		for x := 0; x < ow; x++ {
			s, n := int(cf.start[x]), int(cf.count[x])
			ws := cf.wf[x*cf.stride : x*cf.stride+n]
			for ch := 0; ch < c; ch++ {
				var v float32
				for k, w := range ws {
					v += srow[(s+k)*c+ch] * w
				}
				drow[x*c+ch] = v
			}
		}
	}
}

func vpassF(src []float32, row int, dst []float32, oh int, cf *coeffs) {
	for y := 0; y < oh; y++ {
		s, n := int(cf.start[y]), int(cf.count[y])
		ws := cf.wf[y*cf.stride : y*cf.stride+n]
		d := dst[y*row : (y+1)*row]
		r0 := src[s*row : (s+1)*row]
		r0 = r0[:len(d)]
		w0 := ws[0]
		for i, v := range r0 {
			d[i] = v * w0
		}
		for k := 1; k < n; k++ {
			rk := src[(s+k)*row : (s+k+1)*row]
			rk = rk[:len(d)]
			w := ws[k]
			for i, v := range rk {
				d[i] += v * w
			}
		}
	}
}

// hrow3 is the hot loop of a 3-channel resize. It indexes through unsafe
// pointers: makeCoeffs guarantees start+count <= the row width and count <=
// stride, and bounds checks here cost a third of the resize.
func hrow3(srow, drow []byte, ow int, cf *coeffs) {
	if len(drow) < 3*ow || len(cf.start) < ow || len(cf.wi) < ow*cf.stride || 3*cf.end > len(srow) {
		panic("imageops: hrow3 buffers too short")
	}
	sp := unsafe.Pointer(unsafe.SliceData(srow))
	dp := unsafe.Pointer(unsafe.SliceData(drow))
	wp := unsafe.Pointer(unsafe.SliceData(cf.wi))
	for x := 0; x < ow; x++ {
		s, n := int(cf.start[x]), int(cf.count[x])
		p := unsafe.Add(sp, 3*s)
		w := unsafe.Add(wp, 4*x*cf.stride)
		r, g, b := int32(half), int32(half), int32(half)
		for k := 0; k < n; k++ {
			wk := *(*int32)(unsafe.Add(w, 4*k))
			q := (*[3]uint8)(unsafe.Add(p, 3*k))
			r += int32(q[0]) * wk
			g += int32(q[1]) * wk
			b += int32(q[2]) * wk
		}
		d := (*[3]uint8)(unsafe.Add(dp, 3*x))
		d[0], d[1], d[2] = clamp8(r), clamp8(g), clamp8(b)
	}
}

// hrow3x2 is hrow3 for two adjacent rows: src holds both input rows
// (stride sstride) and dst both output rows (stride dstride).
func hrow3x2(src []byte, sstride int, dst []byte, dstride, ow int, cf *coeffs) {
	if len(dst) < dstride+3*ow || len(cf.start) < ow || len(cf.wi) < ow*cf.stride || sstride+3*cf.end > len(src) {
		panic("imageops: hrow3x2 buffers too short")
	}
	sp := unsafe.Pointer(unsafe.SliceData(src))
	dp := unsafe.Pointer(unsafe.SliceData(dst))
	wp := unsafe.Pointer(unsafe.SliceData(cf.wi))
	for x := 0; x < ow; x++ {
		s, n := int(cf.start[x]), int(cf.count[x])
		p := unsafe.Add(sp, 3*s)
		w := unsafe.Add(wp, 4*x*cf.stride)
		r0, g0, b0 := int32(half), int32(half), int32(half)
		r1, g1, b1 := int32(half), int32(half), int32(half)
		for k := 0; k < n; k++ {
			wk := *(*int32)(unsafe.Add(w, 4*k))
			q := (*[3]uint8)(unsafe.Add(p, 3*k))
			q1 := (*[3]uint8)(unsafe.Add(p, 3*k+sstride))
			r0 += int32(q[0]) * wk
			g0 += int32(q[1]) * wk
			b0 += int32(q[2]) * wk
			r1 += int32(q1[0]) * wk
			g1 += int32(q1[1]) * wk
			b1 += int32(q1[2]) * wk
		}
		d := (*[3]uint8)(unsafe.Add(dp, 3*x))
		d[0], d[1], d[2] = clamp8(r0), clamp8(g0), clamp8(b0)
		d1 := (*[3]uint8)(unsafe.Add(dp, 3*x+dstride))
		d1[0], d1[1], d1[2] = clamp8(r1), clamp8(g1), clamp8(b1)
	}
}

// hpass3Packed runs hrow3packed over h rows.
func hpass3Packed(src []byte, h, iw int, dst []byte, ow int, cf *coeffs) {
	exp, buf := defaultPool.getU64(iw)
	for y := 0; y < h; y++ {
		hrow3packed(src[y*iw*3:(y+1)*iw*3], dst[y*ow*3:(y+1)*ow*3], exp[:iw], ow, cf)
	}
	defaultPool.Put(buf)
}

// swarBits is the weight precision of the packed pass: 21-bit lanes hold
// 255 × 2^13 plus rounding without carrying into the next lane.
const swarBits = 13

// hrow3packed resamples one RGB row with the three channels packed in
// 21-bit lanes of a uint64, so each tap costs one multiply-add instead of
// three. Weights must be non-negative (a negative one would borrow across
// lanes); their 13-bit precision moves an output by at most a level from
// the 22-bit path, and rarely.
func hrow3packed(srow, drow []byte, exp []uint64, ow int, cf *coeffs) {
	for i := range exp {
		q := srow[3*i : 3*i+3 : 3*i+3]
		exp[i] = uint64(q[0]) | uint64(q[1])<<21 | uint64(q[2])<<42
	}
	if len(drow) < 3*ow || len(cf.start) < ow || len(cf.w13) < ow*cf.stride || cf.end > len(exp) {
		panic("imageops: hrow3packed buffers too short")
	}
	ep := unsafe.Pointer(unsafe.SliceData(exp))
	wp := unsafe.Pointer(unsafe.SliceData(cf.w13))
	const round = 1<<(swarBits-1) | 1<<(swarBits-1+21) | 1<<(swarBits-1+42)
	for x := 0; x < ow; x++ {
		s, n := int(cf.start[x]), int(cf.count[x])
		e := unsafe.Add(ep, 8*s)
		w := unsafe.Add(wp, 8*x*cf.stride)
		acc := uint64(round)
		k := 0
		for ; k+1 < n; k += 2 {
			acc += *(*uint64)(unsafe.Add(e, 8*k))**(*uint64)(unsafe.Add(w, 8*k)) +
				*(*uint64)(unsafe.Add(e, 8*k+8))**(*uint64)(unsafe.Add(w, 8*k+8))
		}
		if k < n {
			acc += *(*uint64)(unsafe.Add(e, 8*k)) * *(*uint64)(unsafe.Add(w, 8*k))
		}
		d := drow[3*x : 3*x+3 : 3*x+3]
		// A lane peaks at 255·(2^13+1) + 2^12 < 2^21: no carry, and
		// its top 8 bits are the rounded result.
		d[0] = uint8(acc >> swarBits)
		d[1] = uint8(acc >> (swarBits + 21))
		d[2] = uint8(acc >> (swarBits + 42))
	}
}
