package imageops

import "errors"

// Sentinel errors wrapped by the errors this package returns, so callers can
// tell bad input apart from input the package chooses not to handle.
var (
	// ErrFormat means the bytes are neither JPEG nor PNG.
	ErrFormat = errors.New("unknown image format")
	// ErrTooLarge means the header declares more pixels than the limit.
	ErrTooLarge = errors.New("image too large")
	// ErrUnsupported means a valid file uses a feature this package refuses,
	// such as 12-bit or arithmetic-coded JPEG.
	ErrUnsupported = errors.New("unsupported image feature")
	// ErrCorrupt means the file is damaged: bad entropy data, bad checksums.
	ErrCorrupt = errors.New("corrupt image")
	// ErrTruncated means the file ends before the image data does.
	ErrTruncated = errors.New("truncated image")
	// ErrArgument means a caller passed an invalid argument.
	ErrArgument = errors.New("invalid argument")
)
