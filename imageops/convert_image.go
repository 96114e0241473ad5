package imageops

import (
	"fmt"
	"image"
	"image/color"
)

// put writes one pixel with c channels: gray, gray and alpha (c = 2, a
// PNG stored so, decoded as stored), RGB or RGBA. Gray uses PIL's integer
// ITU-R 601 luma so grayscale conversions match PIL's convert("L"); of a
// gray pixel (r = g = b) it is that level exactly.
func put(dst []byte, c int, r, g, b, a uint8) {
	switch c {
	case 1:
		dst[0] = uint8((uint32(r)*19595 + uint32(g)*38470 + uint32(b)*7471 + 0x8000) >> 16)
	case 2:
		dst[0] = uint8((uint32(r)*19595 + uint32(g)*38470 + uint32(b)*7471 + 0x8000) >> 16)
		dst[1] = a
	case 3:
		dst[0], dst[1], dst[2] = r, g, b
	default:
		dst[0], dst[1], dst[2], dst[3] = r, g, b, a
	}
}

// putGray writes a gray level with c channels.
func putGray(dst []byte, c int, v uint8) {
	switch c {
	case 1:
		dst[0] = v
	case 2:
		dst[0], dst[1] = v, 255
	case 3:
		dst[0], dst[1], dst[2] = v, v, v
	default:
		dst[0], dst[1], dst[2], dst[3] = v, v, v, 255
	}
}

// The YCbCr→RGB tables of libjpeg's jdcolor.c (16-bit fixed point with
// the same rounding), so the pure-Go path converts exactly like libjpeg.
var crR, cbB, crG, cbG [256]int32

func init() {
	const one = 1 << 16
	fix := func(x float64) int32 { return int32(x*one + 0.5) }
	for i := range 256 {
		x := int32(i - 128)
		crR[i] = (fix(1.40200)*x + one/2) >> 16
		cbB[i] = (fix(1.77200)*x + one/2) >> 16
		crG[i] = -fix(0.71414) * x
		cbG[i] = -fix(0.34414)*x + one/2
	}
}

func clampU8(v int32) uint8 {
	if uint32(v) > 255 {
		if v < 0 {
			return 0
		}
		return 255
	}
	return uint8(v)
}

func ycbcrToRGB(y, cb, cr uint8) (uint8, uint8, uint8) {
	yy := int32(y)
	return clampU8(yy + crR[cr]), clampU8(yy + (cbG[cb]+crG[cr])>>16), clampU8(yy + cbB[cb])
}

// inkToRGB converts CMYK ink amounts (0 = no ink) to RGB.
func inkToRGB(c, m, y, k uint8) (uint8, uint8, uint8) {
	w := 255 - uint32(k)
	return uint8(((255-uint32(c))*w + 127) / 255), uint8(((255-uint32(m))*w + 127) / 255), uint8(((255-uint32(y))*w + 127) / 255)
}

// imageToHWC converts a decoded image into pix (h*w*c bytes) by looping over
// the concrete type's Pix, so no pixel goes through the color.Color
// interface. 16-bit samples keep their high byte, as PIL and libpng's
// strip_16 do.
func imageToHWC(img image.Image, pix []byte, c int) error {
	b := img.Bounds()
	h, w := b.Dy(), b.Dx()
	switch m := img.(type) {
	case *image.Gray:
		for y := 0; y < h; y++ {
			src := m.Pix[y*m.Stride : y*m.Stride+w]
			dst := pix[y*w*c : (y+1)*w*c]
			if c == 1 {
				copy(dst, src)
				continue
			}
			for x, v := range src {
				putGray(dst[x*c:], c, v)
			}
		}
	case *image.Gray16:
		for y := 0; y < h; y++ {
			src := m.Pix[y*m.Stride : y*m.Stride+2*w]
			dst := pix[y*w*c : (y+1)*w*c]
			for x := 0; x < w; x++ {
				putGray(dst[x*c:], c, src[2*x])
			}
		}
	case *image.RGBA:
		for y := 0; y < h; y++ {
			src := m.Pix[y*m.Stride : y*m.Stride+4*w]
			dst := pix[y*w*c : (y+1)*w*c]
			if c == 4 {
				copy(dst, src)
				continue
			}
			for x := 0; x < w; x++ {
				s := src[4*x : 4*x+4]
				put(dst[x*c:], c, s[0], s[1], s[2], s[3])
			}
		}
	case *image.NRGBA:
		for y := 0; y < h; y++ {
			src := m.Pix[y*m.Stride : y*m.Stride+4*w]
			dst := pix[y*w*c : (y+1)*w*c]
			if c == 4 {
				copy(dst, src)
				continue
			}
			for x := 0; x < w; x++ {
				s := src[4*x : 4*x+4]
				put(dst[x*c:], c, s[0], s[1], s[2], s[3])
			}
		}
	case *image.RGBA64:
		for y := 0; y < h; y++ {
			src := m.Pix[y*m.Stride : y*m.Stride+8*w]
			dst := pix[y*w*c : (y+1)*w*c]
			for x := 0; x < w; x++ {
				s := src[8*x : 8*x+8]
				put(dst[x*c:], c, s[0], s[2], s[4], s[6])
			}
		}
	case *image.NRGBA64:
		for y := 0; y < h; y++ {
			src := m.Pix[y*m.Stride : y*m.Stride+8*w]
			dst := pix[y*w*c : (y+1)*w*c]
			for x := 0; x < w; x++ {
				s := src[8*x : 8*x+8]
				put(dst[x*c:], c, s[0], s[2], s[4], s[6])
			}
		}
	case *image.CMYK:
		for y := 0; y < h; y++ {
			src := m.Pix[y*m.Stride : y*m.Stride+4*w]
			dst := pix[y*w*c : (y+1)*w*c]
			for x := 0; x < w; x++ {
				s := src[4*x : 4*x+4]
				r, g, bb := inkToRGB(s[0], s[1], s[2], s[3])
				put(dst[x*c:], c, r, g, bb, 255)
			}
		}
	case *image.Paletted:
		var lut [256][4]uint8
		for i, pc := range m.Palette {
			n := color.NRGBAModel.Convert(pc).(color.NRGBA)
			lut[i] = [4]uint8{n.R, n.G, n.B, n.A}
		}
		for y := 0; y < h; y++ {
			src := m.Pix[y*m.Stride : y*m.Stride+w]
			dst := pix[y*w*c : (y+1)*w*c]
			for x, i := range src {
				e := &lut[i]
				put(dst[x*c:], c, e[0], e[1], e[2], e[3])
			}
		}
	case *image.YCbCr:
		return ycbcrToHWC(m, pix, c)
	default:
		return fmt.Errorf("%w: decoded image type %T", ErrUnsupported, img)
	}
	return nil
}

// orient applies an EXIF orientation to an interleaved h×w×c image and
// returns the upright pixels and size.
func orient(pix []byte, h, w, c, o int, alloc func(int) []byte) ([]byte, int, int) {
	out := alloc(h * w * c)
	oh, ow := orientedSize(h, w, o)
	// Output row y, column x reads stored byte offset base(y) + x*step:
	// every orientation is affine, so one loop serves all eight.
	row, last := w*c, (h-1)*w*c
	var step int
	base := func(y int) int { return y * row }
	switch o {
	case 2:
		step, base = -c, func(y int) int { return y*row + (w-1)*c }
	case 3:
		step, base = -c, func(y int) int { return last - y*row + (w-1)*c }
	case 4:
		step, base = c, func(y int) int { return last - y*row }
	case 5:
		step, base = row, func(y int) int { return y * c }
	case 6:
		step, base = -row, func(y int) int { return last + y*c }
	case 7:
		step, base = -row, func(y int) int { return last + (w-1-y)*c }
	case 8:
		step, base = row, func(y int) int { return (w - 1 - y) * c }
	default:
		step = c
	}
	for y := 0; y < oh; y++ {
		d := out[y*ow*c : (y+1)*ow*c]
		off := base(y)
		if c == 3 {
			for x := 0; x < ow; x++ {
				q := pix[off : off+3 : off+3]
				p := d[3*x : 3*x+3 : 3*x+3]
				p[0], p[1], p[2] = q[0], q[1], q[2]
				off += step
			}
			continue
		}
		for x := 0; x < ow; x++ {
			copy(d[x*c:x*c+c], pix[off:off+c])
			off += step
		}
	}
	return out, oh, ow
}

// ycbcrToHWC converts image/jpeg's planar output. For 4:2:0 and 4:2:2 it
// upsamples chroma with libjpeg's "fancy" triangle filter (jdsample.c)
// instead of replicating samples as image/jpeg's own conversion does, which
// brings the pure-Go decoder within a fraction of a level of libjpeg-turbo.
func ycbcrToHWC(m *image.YCbCr, pix []byte, c int) error {
	h, w := m.Rect.Dy(), m.Rect.Dx()
	var sx, sy uint
	switch m.SubsampleRatio {
	case image.YCbCrSubsampleRatio444:
	case image.YCbCrSubsampleRatio422:
		sx = 1
	case image.YCbCrSubsampleRatio420:
		sx, sy = 1, 1
	case image.YCbCrSubsampleRatio440:
		sy = 1
	case image.YCbCrSubsampleRatio411:
		sx = 2
	case image.YCbCrSubsampleRatio410:
		sx, sy = 2, 1
	default:
		return fmt.Errorf("%w: ycbcr subsampling %v", ErrUnsupported, m.SubsampleRatio)
	}
	cw := (w + (1 << sx) - 1) >> sx
	chh := (h + (1 << sy) - 1) >> sy
	fancy := sx == 1 && c != 1
	var cbUp, crUp, sumB, sumR []int32
	if fancy {
		cbUp, crUp = make([]int32, 2*cw), make([]int32, 2*cw)
		sumB, sumR = make([]int32, cw), make([]int32, cw)
	}
	for y := 0; y < h; y++ {
		yrow := m.Y[y*m.YStride : y*m.YStride+w]
		dst := pix[y*w*c : (y+1)*w*c]
		if c == 1 {
			copy(dst, yrow)
			continue
		}
		cy := y >> sy
		cbrow := m.Cb[cy*m.CStride : cy*m.CStride+cw]
		crrow := m.Cr[cy*m.CStride : cy*m.CStride+cw]
		if !fancy {
			for x, yv := range yrow {
				r, g, b := ycbcrToRGB(yv, cbrow[x>>sx], crrow[x>>sx])
				put(dst[x*c:], c, r, g, b, 255)
			}
			continue
		}
		if sy == 1 {
			// Vertical triangle: 3/4 of the nearer chroma row, 1/4 of the
			// other neighbour (edge rows repeat), kept at 4x scale.
			fy := cy - 1
			if y&1 == 1 {
				fy = cy + 1
			}
			fy = min(max(fy, 0), chh-1)
			fb := m.Cb[fy*m.CStride : fy*m.CStride+cw]
			fr := m.Cr[fy*m.CStride : fy*m.CStride+cw]
			for i := range sumB {
				sumB[i] = 3*int32(cbrow[i]) + int32(fb[i])
				sumR[i] = 3*int32(crrow[i]) + int32(fr[i])
			}
			upsampleH2(sumB, cbUp, 8, 7, 4)
			upsampleH2(sumR, crUp, 8, 7, 4)
		} else {
			for i := range sumB {
				sumB[i] = int32(cbrow[i])
				sumR[i] = int32(crrow[i])
			}
			upsampleH2(sumB, cbUp, 1, 2, 2)
			upsampleH2(sumR, crUp, 1, 2, 2)
		}
		for x, yv := range yrow {
			yy := int32(yv)
			cb, cr := cbUp[x], crUp[x]
			put(dst[x*c:], c, clampU8(yy+crR[cr]), clampU8(yy+(cbG[cb]+crG[cr])>>16), clampU8(yy+cbB[cb]), 255)
		}
	}
	return nil
}

// upsampleH2 doubles a row horizontally with libjpeg's triangle filter:
// each output mixes 3/4 of its source sample with 1/4 of the neighbour on
// its side (the edge sample repeats), with libjpeg's alternating rounding
// biases lo and hi and final shift.
func upsampleH2(in, out []int32, lo, hi int32, shift uint) {
	n := len(in)
	for i := 0; i < n; i++ {
		t := 3 * in[i]
		l, r := in[max(i-1, 0)], in[min(i+1, n-1)]
		out[2*i] = (t + l + lo) >> shift
		out[2*i+1] = (t + r + hi) >> shift
	}
}
