package imageops_test

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"

	"github.com/piperun/piperun/imageops"
)

// Decode a photo and resize it to the 224×224 float input of a classifier.
func Example() {
	// A 500×375 JPEG, the size of many ImageNet photos.
	src := image.NewRGBA(image.Rect(0, 0, 500, 375))
	for y := range 375 {
		for x := range 500 {
			src.Set(x, y, color.RGBA{uint8(x / 2), uint8(y / 2), 128, 255})
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, src, &jpeg.Options{Quality: 90}); err != nil {
		fmt.Println(err)
		return
	}
	// The hint lets libjpeg-turbo decode the photo at 5/8 scale (313×235),
	// still above the target, which makes decode and resize faster (the
	// pure-Go decoder of CGO_ENABLED=0 builds decodes it whole).
	img, err := imageops.Decode(buf.Bytes(), 3, imageops.DecodeOptions{ScaleHint: imageops.Size{H: 224, W: 224}})
	if err != nil {
		fmt.Println(err)
		return
	}
	small, err := imageops.Resize(img, 224, 224, imageops.Bilinear)
	if err != nil {
		fmt.Println(err)
		return
	}
	x, _ := imageops.ToFloat(small)
	fmt.Println(x)
	// Output: float32[224 224 3]
}
