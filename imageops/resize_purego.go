//go:build !cgo || piperun_purego

package imageops

// vpass8Fast is vpass8 where there is no C compiler.
func vpass8Fast(src []byte, row int, dst []byte, oh int, cf *coeffs) {
	vpass8(src, row, dst, oh, cf)
}

// vpass13Fast is vpass13 where there is no C compiler.
func vpass13Fast(src []byte, row int, dst []byte, oh int, cf *coeffs) {
	vpass13(src, row, dst, oh, cf)
}

// hpass3PackedFast is the Go packed RGB pass where there is no C compiler.
func hpass3PackedFast(src []byte, h, iw int, dst []byte, ow int, cf *coeffs) {
	hpass3Packed(src, h, iw, dst, ow, cf)
}
