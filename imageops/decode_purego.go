//go:build !cgo || piperun_purego

package imageops

// defaultJPEG is image/jpeg in builds without cgo.
var defaultJPEG jpegDecoder = goJPEG

// hpassJPEG is nil without cgo: image/jpeg decodes whole frames only.
var hpassJPEG hpassDecoder

// Backend names the JPEG decoder Decode uses: "libjpeg-turbo" or "image/jpeg".
const Backend = "image/jpeg"
