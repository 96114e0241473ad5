package testutil

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"path/filepath"
	"testing"
)

// WritePhotos writes twelve files into dir/img, 00.jpg to 11.jpg: ten
// small JPEGs (16×12, each coloured by its number) and two that no decoder
// reads, 01.jpg (not a JPEG at all) and 10.jpg (cut short in its header),
// for tests of what on_error: skip counts.
func WritePhotos(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "img"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		path := filepath.Join(dir, "img", fmt.Sprintf("%02d.jpg", i))
		var b bytes.Buffer
		switch i {
		case 1:
			b.WriteString("not a JPEG at all")
		case 10:
			b.WriteString("\xFF\xD8\xFF\xE0\x00\x10JF")
		default:
			img := image.NewRGBA(image.Rect(0, 0, 16, 12))
			for y := range 12 {
				for x := range 16 {
					img.Set(x, y, color.RGBA{uint8(x * 16), uint8(y * 20), uint8(i * 20), 255})
				}
			}
			if err := jpeg.Encode(&b, img, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
