package imageops

import (
	"bytes"
	"errors"
	"fmt"
	"image/jpeg"
	"io"
)

// goJPEG is the pure-Go jpegDecoder. image/jpeg cannot scale in the DCT
// domain, so it ignores num and returns the full-resolution image.
func goJPEG(data []byte, info *jpegInfo, ch, num int, alloc func(int) []byte, lenient bool) ([]byte, int, int, error) {
	img, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		// Kept as text, not wrapped, as in decodePNG: an io.EOF here
		// must not read as a stream's end.
		var ue jpeg.UnsupportedError
		var fe jpeg.FormatError
		switch {
		case !info.hasEOI:
			// Only reached when lenient: image/jpeg cannot recover a cut
			// file, and whatever it complains about, the cause is the cut.
			return nil, 0, 0, fmt.Errorf("%w: jpeg has no end-of-image marker: %v", ErrTruncated, err)
		case errors.As(err, &ue):
			return nil, 0, 0, fmt.Errorf("%w: jpeg: %v", ErrUnsupported, err)
		case errors.As(err, &fe):
			return nil, 0, 0, fmt.Errorf("%w: jpeg: %v", ErrCorrupt, err)
		case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
			return nil, 0, 0, fmt.Errorf("%w: jpeg: %v", ErrTruncated, err)
		}
		return nil, 0, 0, fmt.Errorf("%w: jpeg: %v", ErrCorrupt, err)
	}
	b := img.Bounds()
	h, w := b.Dy(), b.Dx()
	pix := alloc(h * w * ch)
	if err := imageToHWC(img, pix, ch); err != nil {
		return nil, 0, 0, err
	}
	return pix, h, w, nil
}
