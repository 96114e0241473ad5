package imageops

import (
	"fmt"
	"image"
	"image/color"
)

// put writes one pixel with c channels. Gray uses PIL's integer ITU-R 601
// luma so grayscale conversions match PIL's convert("L").
func put(dst []byte, c int, r, g, b, a uint8) {
	switch c {
	case 1:
		dst[0] = uint8((uint32(r)*19595 + uint32(g)*38470 + uint32(b)*7471 + 0x8000) >> 16)
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
	case 3:
		dst[0], dst[1], dst[2] = v, v, v
	default:
		dst[0], dst[1], dst[2], dst[3] = v, v, v, 255
	}
}

// ycbcrToRGB is JFIF's conversion in the same 16.16 fixed point as
// image/color, inlined here so the loop makes no calls.
func ycbcrToRGB(y, cb, cr uint8) (uint8, uint8, uint8) {
	yy := int32(y) * 0x10101
	cb1 := int32(cb) - 128
	cr1 := int32(cr) - 128
	r := yy + 91881*cr1
	if uint32(r)&0xff000000 == 0 {
		r >>= 16
	} else {
		r = ^(r >> 31)
	}
	g := yy - 22554*cb1 - 46802*cr1
	if uint32(g)&0xff000000 == 0 {
		g >>= 16
	} else {
		g = ^(g >> 31)
	}
	b := yy + 116130*cb1
	if uint32(b)&0xff000000 == 0 {
		b >>= 16
	} else {
		b = ^(b >> 31)
	}
	return uint8(r), uint8(g), uint8(b)
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
		for y := 0; y < h; y++ {
			yrow := m.Y[y*m.YStride : y*m.YStride+w]
			co := (y >> sy) * m.CStride
			cw := (w + (1 << sx) - 1) >> sx
			cbrow := m.Cb[co : co+cw]
			crrow := m.Cr[co : co+cw]
			dst := pix[y*w*c : (y+1)*w*c]
			if c == 1 {
				copy(dst, yrow)
				continue
			}
			for x, yv := range yrow {
				r, g, bb := ycbcrToRGB(yv, cbrow[x>>sx], crrow[x>>sx])
				put(dst[x*c:], c, r, g, bb, 255)
			}
		}
	default:
		return fmt.Errorf("%w: decoded image type %T", ErrUnsupported, img)
	}
	return nil
}

// orient applies an EXIF orientation to an interleaved h×w×c image and
// returns the upright pixels and size.
func orient(pix []byte, h, w, c, o int, alloc func(int) []byte) ([]byte, int, int) {
	out := alloc(len(pix))
	oh, ow := orientedSize(h, w, o)
	// For each output pixel (y, x), src is the stored pixel shown there.
	for y := 0; y < oh; y++ {
		for x := 0; x < ow; x++ {
			var sy, sx int
			switch o {
			case 2:
				sy, sx = y, w-1-x
			case 3:
				sy, sx = h-1-y, w-1-x
			case 4:
				sy, sx = h-1-y, x
			case 5:
				sy, sx = x, y
			case 6:
				sy, sx = h-1-x, y
			case 7:
				sy, sx = h-1-x, w-1-y
			case 8:
				sy, sx = x, w-1-y
			default:
				sy, sx = y, x
			}
			s := (sy*w + sx) * c
			d := (y*ow + x) * c
			copy(out[d:d+c], pix[s:s+c])
		}
	}
	return out, oh, ow
}
