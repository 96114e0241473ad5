//go:build !cgo || piperun_purego

package imageops

// windowJPEG is nil where no decoder can decode a window directly; Decode
// then decodes the whole image and crops it.
var windowJPEG windowDecoder
