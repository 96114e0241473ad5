// Package imageops holds the image functions a pipeline applies to samples:
// decoding JPEG and PNG into HWC tensors, resizing, cropping, flipping,
// turning, colour adjustments as torchvision computes them (color.go) and
// the conversions that prepare an image for a model.
//
// Every function is pure: it reads its input tensors and returns new ones
// that the caller owns. Images are HWC tensors, uint8 [H, W, C] after
// Decode and float32 after ToFloat. Random functions draw from a caller
// supplied RNG so the engine controls seeding and results are reproducible.
//
// The JPEG fast path uses libjpeg-turbo through cgo (decode_turbo.go). Builds
// with CGO_ENABLED=0 or the piperun_purego tag use Go's image/jpeg instead
// (decode_purego.go); both builds apply the same header checks, so an input
// that one build refuses the other refuses too.
package imageops
