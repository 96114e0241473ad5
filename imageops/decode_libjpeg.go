//go:build cgo && !piperun_purego

package imageops

/*
#cgo LDFLAGS: -ljpeg
#include "jpeg_cgo.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"
)

// defaultJPEG is libjpeg-turbo in cgo builds.
var defaultJPEG jpegDecoder = libjpegDecode

// hpassJPEG is libjpeg-turbo with the packed horizontal pass in cgo builds.
var hpassJPEG hpassDecoder = libjpegDecodeHpass3

// Backend names the JPEG decoder Decode uses: "libjpeg-turbo" or "image/jpeg".
const Backend = "libjpeg-turbo"

// decompressors keeps libjpeg decompressors between calls: jpeg_create_decompress
// allocates libjpeg's state, which costs more than decoding a thumbnail. A
// bounded channel rather than a sync.Pool, because a decompressor dropped
// by the GC would leak its C memory.
var decompressors = make(chan *C.pr_dec, 64)

func getDecompressor() (*C.pr_dec, error) {
	select {
	case d := <-decompressors:
		return d, nil
	default:
	}
	d := C.pr_dec_new()
	if d == nil {
		return nil, errors.New("libjpeg-turbo: cannot create a decompressor")
	}
	return d, nil
}

func putDecompressor(d *C.pr_dec) {
	select {
	case decompressors <- d:
	default:
		C.pr_dec_free(d)
	}
}

// strictFlag is the C int for !lenient: whether libjpeg warnings (corrupt
// data, premature end) are errors.
func strictFlag(lenient bool) C.int {
	if lenient {
		return 0
	}
	return 1
}

// colorSpace is libjpeg's output colour space for ch interleaved channels.
// libjpeg-turbo's JCS_EXT_* spaces write RGB or RGBA directly, so no
// repacking is needed.
func colorSpace(ch int) C.int {
	switch ch {
	case 1:
		return C.JCS_GRAYSCALE
	case 3:
		return C.JCS_EXT_RGB
	}
	return C.JCS_EXT_RGBA
}

// libjpegDecode is the libjpeg-turbo jpegDecoder. It decodes with the
// accurate integer IDCT and fancy upsampling (djpeg's defaults), scaled by
// num/8. Unless lenient, libjpeg warnings (corrupt data, premature end) are
// errors.
func libjpegDecode(data []byte, info *jpegInfo, ch, num int, alloc func(int) []byte, lenient bool) ([]byte, int, int, error) {
	d, err := getDecompressor()
	if err != nil {
		return nil, 0, 0, err
	}
	defer putDecompressor(d)
	sw, sh := scaled(info.width, num), scaled(info.height, num)
	cmyk := info.components == 4
	color, comps := colorSpace(ch), ch
	if cmyk {
		// libjpeg cannot convert CMYK to RGB or gray; take the raw inks.
		color, comps = C.JCS_CMYK, 4
	}
	var dst []byte
	if cmyk {
		dst = defaultPool.Get(sh * sw * 4)
	} else {
		dst = alloc(sh * sw * ch)
	}
	rc := C.pr_decode(d, (*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data)), C.int(num),
		color, C.int(comps), C.int(sw), C.int(sh), (*C.uchar)(unsafe.Pointer(&dst[0])), strictFlag(lenient))
	if rc != 0 {
		if cmyk {
			defaultPool.Put(dst)
		}
		return nil, 0, 0, libjpegError(C.GoString(C.pr_dec_msg(d)))
	}
	if !cmyk {
		return dst, sh, sw, nil
	}
	out := alloc(sh * sw * ch)
	cmykToHWC(dst[:sh*sw*4], out, ch, info.adobe)
	defaultPool.Put(dst)
	return out, sh, sw, nil
}

// libjpegError classifies a libjpeg message and lowercases its first letter
// to read like the rest of this package's errors.
func libjpegError(msg string) error {
	lower := strings.ToLower(msg)
	if msg != "" {
		msg = strings.ToLower(msg[:1]) + msg[1:]
	}
	switch {
	case strings.Contains(lower, "premature end of jpeg file"):
		return fmt.Errorf("%w: libjpeg-turbo: %s", ErrTruncated, msg)
	case strings.Contains(lower, "unsupported") || strings.Contains(lower, "not supported"):
		return fmt.Errorf("%w: libjpeg-turbo: %s", ErrUnsupported, msg)
	}
	return fmt.Errorf("%w: libjpeg-turbo: %s", ErrCorrupt, msg)
}

// libjpegDecodeHpass3 is the libjpeg-turbo hpassDecoder: libjpegDecode of an
// RGB image with the resize's packed horizontal pass (hpass3PackedFast)
// run on each group of 16 rows as libjpeg delivers it.
func libjpegDecodeHpass3(data []byte, info *jpegInfo, num, ow int, cf *coeffs, alloc func(int) []byte, lenient bool) ([]byte, int, error) {
	sw, sh := scaled(info.width, num), scaled(info.height, num)
	w16, exp, release := hpass3Weights(cf, sw, ow)
	defer release()
	d, err := getDecompressor()
	if err != nil {
		return nil, 0, err
	}
	defer putDecompressor(d)
	strip := defaultPool.Get(16 * sw * 3)
	defer defaultPool.Put(strip)
	dst := alloc(sh * ow * 3)
	rc := C.pr_decode_hpass3(d, (*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data)), C.int(num),
		C.int(sw), C.int(sh), (*C.uchar)(unsafe.Pointer(&strip[0])), (*C.uchar)(unsafe.Pointer(&dst[0])), C.int(ow),
		(*C.int32_t)(unsafe.Pointer(&cf.start[0])), (*C.int32_t)(unsafe.Pointer(&cf.count[0])),
		(*C.uint64_t)(unsafe.Pointer(&cf.w13[0])), C.int(cf.stride), w16, C.int(cf.groups16), exp, strictFlag(lenient))
	if rc != 0 {
		return nil, 0, libjpegError(C.GoString(C.pr_dec_msg(d)))
	}
	return dst, sh, nil
}
