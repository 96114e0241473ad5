package imageops

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// jpegInfo is what the header scan learns before any pixel is decoded.
type jpegInfo struct {
	width, height  int
	components     int
	precision      int
	sof            byte
	adobe          bool // an Adobe APP14 segment is present
	adobeTransform int
	orientation    int // EXIF orientation, 1 when absent or invalid
	hasEOI         bool
}

var (
	jpegMagic = []byte{0xff, 0xd8}
	pngMagic  = []byte("\x89PNG\r\n\x1a\n")
	// pngIEND is the type of the chunk that ends every PNG.
	pngIEND = []byte("IEND")
)

// scanJPEG walks the marker segments up to the first SOS. It validates the
// frame header itself rather than trusting libjpeg or image/jpeg to, so both
// builds refuse the same inputs, and so dimensions are known before any
// pixel buffer is allocated.
func scanJPEG(data []byte) (jpegInfo, error) {
	info := jpegInfo{orientation: 1}
	if !bytes.HasPrefix(data, jpegMagic) {
		return info, fmt.Errorf("%w: missing jpeg start-of-image marker", ErrFormat)
	}
	sawSOF := false
	i := 2
	for {
		// Markers may be preceded by any number of 0xff fill bytes.
		for i < len(data) && data[i] != 0xff {
			i++ // tolerate garbage between segments, as libjpeg does (with a warning)
		}
		for i < len(data) && data[i] == 0xff {
			i++
		}
		if i >= len(data) {
			return info, fmt.Errorf("%w: jpeg header ends before the image data", ErrTruncated)
		}
		m := data[i]
		i++
		switch {
		case m == 0xd8 || m == 0x01 || (m >= 0xd0 && m <= 0xd7):
			continue // standalone markers carry no length
		case m == 0xd9:
			return info, fmt.Errorf("%w: jpeg ends before any image data", ErrCorrupt)
		}
		if i+2 > len(data) {
			return info, fmt.Errorf("%w: jpeg header ends inside a marker", ErrTruncated)
		}
		n := int(binary.BigEndian.Uint16(data[i:]))
		if n < 2 {
			return info, fmt.Errorf("%w: jpeg marker 0x%02x has length %d", ErrCorrupt, m, n)
		}
		if i+n > len(data) {
			return info, fmt.Errorf("%w: jpeg header ends inside marker 0x%02x", ErrTruncated, m)
		}
		seg := data[i+2 : i+n]
		switch {
		case m == 0xe1 && info.orientation == 1 && bytes.HasPrefix(seg, []byte("Exif\x00\x00")):
			info.orientation = exifOrientation(seg[6:])
		case m == 0xee && len(seg) >= 12 && bytes.HasPrefix(seg, []byte("Adobe")):
			info.adobe = true
			info.adobeTransform = int(seg[11])
		case m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc:
			if sawSOF {
				return info, fmt.Errorf("%w: jpeg has more than one frame header", ErrCorrupt)
			}
			sawSOF = true
			if len(seg) < 6 {
				return info, fmt.Errorf("%w: jpeg frame header too short", ErrCorrupt)
			}
			info.sof = m
			info.precision = int(seg[0])
			info.height = int(binary.BigEndian.Uint16(seg[1:]))
			info.width = int(binary.BigEndian.Uint16(seg[3:]))
			info.components = int(seg[5])
			if len(seg) < 6+3*info.components {
				return info, fmt.Errorf("%w: jpeg frame header too short for %d components", ErrCorrupt, info.components)
			}
		case m == 0xda:
			if !sawSOF {
				return info, fmt.Errorf("%w: jpeg scan before frame header", ErrCorrupt)
			}
			// Entropy-coded data stuffs every 0xff as 0xff00, so an EOI
			// after the first scan means the file was not cut short.
			info.hasEOI = bytes.LastIndex(data[i+n:], []byte{0xff, 0xd9}) >= 0
			return info, info.check()
		}
		i += n
	}
}

// check refuses frame types and sizes the decoders cannot or should not
// handle, naming the reason.
func (info *jpegInfo) check() error {
	switch info.sof {
	case 0xc0, 0xc1, 0xc2:
	case 0xc3:
		return fmt.Errorf("%w: lossless jpeg (sof3)", ErrUnsupported)
	case 0xc9, 0xca, 0xcb, 0xcd, 0xce, 0xcf:
		return fmt.Errorf("%w: arithmetic-coded jpeg (sof%d)", ErrUnsupported, info.sof-0xc0)
	default:
		return fmt.Errorf("%w: hierarchical jpeg (sof%d)", ErrUnsupported, info.sof-0xc0)
	}
	if info.precision != 8 {
		return fmt.Errorf("%w: %d-bit jpeg (only 8-bit samples are supported)", ErrUnsupported, info.precision)
	}
	switch info.components {
	case 1, 3, 4:
	default:
		return fmt.Errorf("%w: jpeg with %d components", ErrUnsupported, info.components)
	}
	if info.width == 0 || info.height == 0 {
		return fmt.Errorf("%w: jpeg declares %dx%d (width×height) pixels (a zero height needs a dnl marker, which is not supported)", ErrUnsupported, info.width, info.height)
	}
	return nil
}

// exifOrientation reads tag 0x0112 from IFD0 of a TIFF structure in either
// byte order. Anything missing or out of range reads as 1 (upright), which is
// what viewers do with the invalid value 0.
func exifOrientation(b []byte) int {
	if len(b) < 8 {
		return 1
	}
	var bo binary.ByteOrder
	switch string(b[:4]) {
	case "II*\x00":
		bo = binary.LittleEndian
	case "MM\x00*":
		bo = binary.BigEndian
	default:
		return 1
	}
	off := uint64(bo.Uint32(b[4:]))
	if off+2 > uint64(len(b)) {
		return 1
	}
	n := int(bo.Uint16(b[off:]))
	for k := 0; k < n; k++ {
		e := off + 2 + 12*uint64(k)
		if e+12 > uint64(len(b)) {
			return 1
		}
		if bo.Uint16(b[e:]) != 0x0112 {
			continue
		}
		var v int
		switch bo.Uint16(b[e+2:]) {
		case 1: // BYTE
			v = int(b[e+8])
		case 3: // SHORT
			v = int(bo.Uint16(b[e+8:]))
		case 4: // LONG
			v = int(bo.Uint32(b[e+8:]))
		default:
			return 1
		}
		if v < 1 || v > 8 {
			return 1
		}
		return v
	}
	return 1
}

// pngInfo is what the chunk scan learns before decoding.
type pngInfo struct {
	width, height int
	bitDepth      int
	colorType     int
	hasTRNS       bool
}

// scanPNG reads IHDR and notes a tRNS chunk before the first IDAT. CRCs are
// left to image/png, which checks every chunk.
func scanPNG(data []byte) (pngInfo, error) {
	var info pngInfo
	if !bytes.HasPrefix(data, pngMagic) {
		return info, fmt.Errorf("%w: missing png signature", ErrFormat)
	}
	i := len(pngMagic)
	if i+8+13 > len(data) || string(data[i+4:i+8]) != "IHDR" {
		return info, fmt.Errorf("%w: png has no complete ihdr chunk", ErrTruncated)
	}
	ihdr := data[i+8:]
	w, h := binary.BigEndian.Uint32(ihdr), binary.BigEndian.Uint32(ihdr[4:])
	if w == 0 || h == 0 || w > 1<<31-1 || h > 1<<31-1 {
		return info, fmt.Errorf("%w: png declares %dx%d (width×height) pixels", ErrCorrupt, w, h)
	}
	info.width, info.height = int(w), int(h)
	info.bitDepth, info.colorType = int(ihdr[8]), int(ihdr[9])
	for i < len(data)-8 {
		n := int(binary.BigEndian.Uint32(data[i:]))
		typ := string(data[i+4 : i+8])
		if typ == "tRNS" {
			info.hasTRNS = true
		}
		if typ == "IDAT" || n < 0 || n > len(data) {
			break
		}
		i += 12 + n
	}
	return info, nil
}

// channels is the channel count of the image as stored, as
// tf.io.decode_png's channels=0 gives it: gray, also with a transparency
// key, 1; gray+alpha 2 (PIL's "LA"); truecolor 3, also with a
// transparency key (PIL's "RGB", keeping the key aside); RGBA 4; a
// palette 3, or 4 when it has transparency (PIL keeps the indexes, "P").
func (info *pngInfo) channels() int {
	switch info.colorType {
	case 0:
		return 1
	case 4:
		return 2
	case 6:
		return 4
	case 3:
		if info.hasTRNS {
			return 4
		}
	}
	return 3
}

// orientedSize returns the upright height and width of a stored h×w image.
func orientedSize(h, w, orientation int) (int, int) {
	if orientation >= 5 {
		return w, h
	}
	return h, w
}
