//go:build cgo && !piperun_purego

package imageops

/*
#cgo CFLAGS: -O3
#include "resize_cgo.h"
*/
import "C"

import "unsafe"

// vpass8Fast is the C vertical pass (resize_cgo.c), which the compiler
// vectorizes; it gives exactly vpass8's bytes.
func vpass8Fast(src []byte, row int, dst []byte, oh int, cf *coeffs) {
	if oh == 0 || row == 0 {
		return
	}
	if len(dst) < oh*row || len(cf.start) < oh || len(cf.count) < oh || len(cf.wi) < (oh-1)*cf.stride+1 || len(src) < cf.end*row {
		panic("imageops: vpass8Fast buffers too short")
	}
	acc, accBuf := defaultPool.getI32(row)
	C.pr_vpass8((*C.uint8_t)(unsafe.Pointer(&src[0])), C.int(row), (*C.uint8_t)(unsafe.Pointer(&dst[0])), C.int(oh),
		(*C.int32_t)(unsafe.Pointer(&cf.start[0])), (*C.int32_t)(unsafe.Pointer(&cf.count[0])),
		(*C.int32_t)(unsafe.Pointer(&cf.wi[0])), C.int(cf.stride), (*C.int32_t)(unsafe.Pointer(&acc[0])))
	defaultPool.Put(accBuf)
}

// vpass13Fast is the C vertical pass with 13-bit weights (resize_cgo.c),
// two input rows per 16-bit multiply-add where the CPU has AVX2; it gives
// exactly vpass13's bytes.
func vpass13Fast(src []byte, row int, dst []byte, oh int, cf *coeffs) {
	if oh == 0 || row == 0 {
		return
	}
	if len(dst) < oh*row || len(cf.start) < oh || len(cf.count) < oh || len(cf.w13) < oh*cf.stride || len(src) < cf.end*row {
		panic("imageops: vpass13Fast buffers too short")
	}
	// Only the loop for CPUs without AVX2 (hpassAVX2 asks the same
	// question) needs a row of accumulators.
	var accp *C.int32_t
	var accBuf []byte
	if !hpassAVX2 {
		var acc []int32
		acc, accBuf = defaultPool.getI32(row)
		accp = (*C.int32_t)(unsafe.Pointer(&acc[0]))
	}
	C.pr_vpass13((*C.uint8_t)(unsafe.Pointer(&src[0])), C.int(row), (*C.uint8_t)(unsafe.Pointer(&dst[0])), C.int(oh),
		(*C.int32_t)(unsafe.Pointer(&cf.start[0])), (*C.int32_t)(unsafe.Pointer(&cf.count[0])),
		(*C.uint64_t)(unsafe.Pointer(&cf.w13[0])), C.int(cf.stride), accp)
	if accBuf != nil {
		defaultPool.Put(accBuf)
	}
}

// hpass3PackedFast is the C packed RGB horizontal pass (resize_cgo.c); it
// gives exactly hrow3packed's bytes, row after row.
func hpass3PackedFast(src []byte, h, iw int, dst []byte, ow int, cf *coeffs) {
	if h == 0 || ow == 0 {
		return
	}
	if len(src) < h*iw*3 || len(dst) < h*ow*3 {
		panic("imageops: hpass3PackedFast buffers too short")
	}
	w16, exp, release := hpass3Weights(cf, iw, ow)
	defer release()
	C.pr_hpass3packed((*C.uint8_t)(unsafe.Pointer(&src[0])), C.int(h), C.int(iw), (*C.uint8_t)(unsafe.Pointer(&dst[0])), C.int(ow),
		(*C.int32_t)(unsafe.Pointer(&cf.start[0])), (*C.int32_t)(unsafe.Pointer(&cf.count[0])),
		(*C.uint64_t)(unsafe.Pointer(&cf.w13[0])), C.int(cf.stride), w16, C.int(cf.groups16), exp)
}

// hpass3Weights checks cf's weights against a pass of rows of iw pixels
// to ow and returns the C pass's arguments for them: the AVX2 layout w16
// where cf has one, and the expansion scratch where the AVX2 loop will
// not run, which release gives back.
func hpass3Weights(cf *coeffs, iw, ow int) (w16 *C.int16_t, exp *C.uint64_t, release func()) {
	if ow <= 0 || len(cf.start) < ow || len(cf.count) < ow || len(cf.w13) < ow*cf.stride || cf.end > iw ||
		len(cf.w16) > 0 && len(cf.w16) < ow*cf.groups16*16 {
		panic("imageops: packed pass weights do not fit the rows")
	}
	if len(cf.w16) > 0 {
		w16 = (*C.int16_t)(unsafe.Pointer(&cf.w16[0]))
	}
	release = func() {}
	if w16 == nil || !hpassAVX2 {
		e, buf := defaultPool.getU64(iw)
		exp, release = (*C.uint64_t)(unsafe.Pointer(&e[0])), func() { defaultPool.Put(buf) }
	}
	return w16, exp, release
}

// hpassAVX2 is pr_hpass3_avx2, asked once: the C pass then needs no
// expansion scratch.
var hpassAVX2 = C.pr_hpass3_avx2() == 1
