//go:build cgo && !piperun_purego

package tensor

/*
#cgo CFLAGS: -O2 -fno-fast-math
#include "lut_cgo.h"
*/
import "C"

import "unsafe"

// affineFast is whether affineInto runs: this CPU has AVX2 and FMA.
var affineFast = C.pr_affine_fast() == 1

// affineInto writes (float32(src[i])/255 - sub[i%c]) * mul[i%c] to dst[i]
// for every i < len(dst), c = len(sub) (1 or 3); len(src) >= len(dst).
func affineInto(dst []float32, src []byte, sub, mul []float32) {
	if len(dst) == 0 {
		return
	}
	C.pr_affine((*C.uint8_t)(unsafe.Pointer(&src[0])), (*C.float)(unsafe.Pointer(&dst[0])), C.size_t(len(dst)),
		C.int(len(sub)), (*C.float)(unsafe.Pointer(&sub[0])), (*C.float)(unsafe.Pointer(&mul[0])))
}
