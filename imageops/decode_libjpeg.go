//go:build cgo && !piperun_purego

package imageops

/*
#cgo LDFLAGS: -lturbojpeg
#include <turbojpeg.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"
)

// defaultJPEG is libjpeg-turbo in cgo builds.
var defaultJPEG jpegDecoder = turboJPEG

// Backend names the JPEG decoder Decode uses: "libjpeg-turbo" or "image/jpeg".
const Backend = "libjpeg-turbo"

// handles keeps decompressors between calls: tjInitDecompress allocates
// libjpeg's state, which costs more than decoding a thumbnail. A bounded
// channel rather than a sync.Pool, because a handle dropped by the GC would
// leak its C memory.
var handles = make(chan C.tjhandle, 64)

func getHandle() (C.tjhandle, error) {
	select {
	case h := <-handles:
		return h, nil
	default:
	}
	h := C.tjInitDecompress()
	if h == nil {
		return nil, errors.New("libjpeg-turbo: cannot create a decompressor")
	}
	return h, nil
}

func putHandle(h C.tjhandle) {
	select {
	case handles <- h:
	default:
		C.tjDestroy(h)
	}
}

// turboJPEG is the libjpeg-turbo jpegDecoder. It decodes with the accurate
// integer IDCT and fancy upsampling (djpeg's defaults), scaled by num/8.
// Unless lenient, libjpeg warnings (corrupt data, premature end) are errors.
func turboJPEG(data []byte, info *jpegInfo, ch, num int, alloc func(int) []byte, lenient bool) ([]byte, int, int, error) {
	th, err := getHandle()
	if err != nil {
		return nil, 0, 0, err
	}
	defer putHandle(th)
	sw, sh := scaled(info.width, num), scaled(info.height, num)
	flags := C.int(C.TJFLAG_LIMITSCANS)
	if !lenient {
		flags |= C.TJFLAG_STOPONWARNING
	}
	var pf C.int
	cmyk := info.components == 4
	switch {
	case cmyk:
		// libjpeg cannot convert CMYK to RGB or gray; take the raw inks.
		pf = C.TJPF_CMYK
	case ch == 1:
		pf = C.TJPF_GRAY
	case ch == 3:
		pf = C.TJPF_RGB
	default:
		pf = C.TJPF_RGBA
	}
	var dst []byte
	if cmyk {
		dst = defaultPool.Get(sh * sw * 4)
	} else {
		dst = alloc(sh * sw * ch)
	}
	rc := C.tjDecompress2(th, (*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data)),
		(*C.uchar)(unsafe.Pointer(&dst[0])), C.int(sw), 0, C.int(sh), pf, flags)
	if rc != 0 {
		msg := C.GoString(C.tjGetErrorStr2(th))
		if !(lenient && C.tjGetErrorCode(th) == C.TJERR_WARNING) {
			if cmyk {
				defaultPool.Put(dst)
			}
			return nil, 0, 0, turboError(msg)
		}
	}
	if !cmyk {
		return dst, sh, sw, nil
	}
	out := alloc(sh * sw * ch)
	cmykToHWC(dst[:sh*sw*4], out, ch, info.adobe)
	defaultPool.Put(dst)
	return out, sh, sw, nil
}

// turboError classifies a libjpeg message and lowercases its first letter
// to read like the rest of this package's errors.
func turboError(msg string) error {
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
