//go:build !cgo || piperun_purego

package imageops

// vpass8Fast is vpass8 where there is no C compiler.
func vpass8Fast(src []byte, row int, dst []byte, oh int, cf *coeffs) {
	vpass8(src, row, dst, oh, cf)
}
