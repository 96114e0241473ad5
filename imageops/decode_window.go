//go:build cgo && !piperun_purego

package imageops

// #include "jpeg_cgo.h"
import "C"

import (
	"unsafe"
)

// windowJPEG decodes only window r of the stored image scaled by num/8,
// through libjpeg's partial-decode API (jpeg_crop_scanline and
// jpeg_skip_scanlines). Unless lenient, the rows below the window are
// entropy-decoded as well (without their IDCT), so damage anywhere in the
// file is reported as by libjpegDecode, whatever window a seed draws;
// lenient, they are never read.
var windowJPEG windowDecoder = func(data []byte, info *jpegInfo, ch, num int, r Rect, alloc func(int) []byte, lenient bool) ([]byte, error) {
	d, err := getDecompressor()
	if err != nil {
		return nil, err
	}
	defer putDecompressor(d)
	sw, sh := scaled(info.width, num), scaled(info.height, num)
	rowbuf := defaultPool.Get(sw * ch)
	defer defaultPool.Put(rowbuf)
	out := alloc(r.H * r.W * ch)
	rc := C.pr_decode_window(d, (*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data)), C.int(num),
		colorSpace(ch), C.int(ch), C.int(sw), C.int(sh), C.int(r.Y), C.int(r.X), C.int(r.H), C.int(r.W),
		(*C.uchar)(unsafe.Pointer(&out[0])), (*C.uchar)(unsafe.Pointer(&rowbuf[0])), strictFlag(lenient))
	if rc != 0 {
		return nil, libjpegError(C.GoString(C.pr_dec_msg(d)))
	}
	return out, nil
}
