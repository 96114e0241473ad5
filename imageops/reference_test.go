package imageops

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/piperun/piperun/tensor"
)

// readPNM parses the binary PPM (P6) or PGM (P5) that djpeg writes.
func readPNM(b []byte) (*tensor.Tensor, error) {
	r := bufio.NewReader(bytes.NewReader(b))
	var magic string
	var w, h, maxv int
	if _, err := fmt.Fscan(r, &magic, &w, &h, &maxv); err != nil {
		return nil, err
	}
	if _, err := r.ReadByte(); err != nil { // the single whitespace after maxval
		return nil, err
	}
	c := 3
	if magic == "P5" {
		c = 1
	} else if magic != "P6" {
		return nil, fmt.Errorf("pnm magic %q", magic)
	}
	t := tensor.New(tensor.Uint8, h, w, c)
	if _, err := r.Read(t.Data[:0]); err != nil {
		return nil, err
	}
	n := 0
	for n < len(t.Data) {
		k, err := r.Read(t.Data[n:])
		if err != nil {
			return nil, err
		}
		n += k
	}
	return t, nil
}

func writePNM(path string, t *tensor.Tensor) error {
	magic := "P6"
	if t.Shape[2] == 1 {
		magic = "P5"
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n%d %d\n255\n", magic, t.Shape[1], t.Shape[0])
	b.Write(t.Data)
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// TestDecodeMatchesDjpeg checks both decoders against libjpeg-turbo's own
// command-line decoder on every shared photo and the JPEG edge cases djpeg
// can write as PPM (not CMYK).
func TestDecodeMatchesDjpeg(t *testing.T) {
	djpeg, err := exec.LookPath("djpeg")
	if err != nil {
		t.Skip("djpeg not installed (Debian: apt-get install libjpeg-turbo-progs)")
	}
	var files []string
	pdir := sharedData(t, "photos/imagenet")
	for _, r := range readManifest(t, pdir) {
		files = append(files, filepath.Join(pdir, r["file"]))
	}
	edir := sharedData(t, "jpeg-edge")
	for _, f := range []string{"video-001.jpeg", "video-001.progressive.jpeg", "video-001.rgb.jpeg", "video-005.gray.jpeg",
		"video-001.q50.420.jpeg", "video-001.q50.422.jpeg", "video-001.q50.444.progressive.jpeg", "video-001.restart2.jpeg"} {
		files = append(files, filepath.Join(edir, "go-image-testdata", f))
	}
	files = append(files, filepath.Join(edir, "libjpeg-turbo", "testorig.jpg"))
	var worstFast int
	var sumGo, worstGo float64
	for _, f := range files {
		data := readFile(t, f)
		out, err := exec.Command(djpeg, "-ppm", f).Output()
		if err != nil {
			t.Fatalf("djpeg %s: %v", f, err)
		}
		ref, err := readPNM(out)
		if err != nil {
			t.Fatalf("djpeg output for %s: %v", f, err)
		}
		fast, err := Decode(data, 0, DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(fast.Shape) != fmt.Sprint(ref.Shape) {
			t.Fatalf("%s: shape %v, djpeg %v", f, fast.Shape, ref.Shape)
		}
		if Backend == "libjpeg-turbo" {
			m := maxAbsDiff(fast.Data, ref.Data)
			worstFast = max(worstFast, m)
			if m > 1 {
				t.Errorf("%s: max abs diff %d from djpeg, want <= 1", filepath.Base(f), m)
			}
		}
		slow, err := DecodePureGo(data, 0, DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mad := meanAbsDiff(slow.Data, ref.Data)
		if strings.HasSuffix(f, ".rgb.jpeg") {
			// image/jpeg converts subsampled Adobe RGB itself, returning
			// RGBA with replicated G and B planes; libjpeg interpolates
			// them. Measured 4.2 levels; the png reference test covers it.
			continue
		}
		sumGo += mad
		worstGo = max(worstGo, mad)
		if mad > 2 {
			t.Errorf("%s: pure-Go mean abs diff %.3f from djpeg, want <= 2", filepath.Base(f), mad)
		}
	}
	t.Logf("%d files: libjpeg-turbo max abs diff %d; pure Go mean abs diff %.3f on average, %.3f worst",
		len(files), worstFast, sumGo/float64(len(files)-1), worstGo)
}

// pythonWithPIL finds a Python interpreter that can import PIL.
func pythonWithPIL() string {
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import PIL").Run() == nil {
			return p
		}
	}
	return ""
}

const pilResize = `
import sys
from PIL import Image
out, method = sys.argv[1], sys.argv[2]
m = {"bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC, "area": Image.BOX, "nearest": Image.NEAREST}[method]
for path in sys.argv[3:]:
    im = Image.open(path)
    im.resize((224, 224), m).save(path + "." + method + ".pnm")
`

// TestResizeMatchesPIL resizes the decoded photos to 224×224 and compares
// with PIL's Image.resize of the very same pixels.
func TestResizeMatchesPIL(t *testing.T) {
	py := pythonWithPIL()
	if py == "" {
		t.Skip("no python3 with PIL (Debian: apt-get install python3-pil)")
	}
	names, photos := photos(t)
	dir := t.TempDir()
	var paths []string
	var imgs []*tensor.Tensor
	for i := 0; i < len(photos); i += 4 {
		img, err := Decode(photos[i], 0, DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, names[i]+".pnm")
		if err := writePNM(p, img); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
		imgs = append(imgs, img)
	}
	// Nearest may pick the neighbouring pixel where PIL's affine transform
	// rounds a sample position landing exactly between two pixels the other
	// way; measured 0.03 on average.
	limits := map[string]float64{Bilinear: 1.5, Bicubic: 1.5, Area: 1.5, Nearest: 1.5}
	for _, method := range []string{Bilinear, Bicubic, Area, Nearest} {
		cmd := exec.Command(py, append([]string{"-c", pilResize, dir, method}, paths...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("PIL: %v\n%s", err, out)
		}
		var sum, worst float64
		for i, img := range imgs {
			got, err := Resize(img, 224, 224, method)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := readPNM(readFile(t, paths[i]+"."+method+".pnm"))
			if err != nil {
				t.Fatal(err)
			}
			mad := meanAbsDiff(got.Data, ref.Data)
			sum += mad
			worst = max(worst, mad)
			if mad > limits[method] {
				t.Errorf("%s %s: mean abs diff %.3f from PIL, want <= %.1f", method, filepath.Base(paths[i]), mad, limits[method])
			}
		}
		t.Logf("%s: %d photos, mean abs diff from PIL %.4f on average, %.4f worst", method, len(imgs), sum/float64(len(imgs)), worst)
	}
}

// TestDCTScaledResizeAccuracy measures what a ScaleHint costs in accuracy:
// decode at a reduced DCT scale then resize, against a full decode then
// the same resize (which is bit-exact with PIL).
func TestDCTScaledResizeAccuracy(t *testing.T) {
	names, photos := photos(t)
	var sum, worst float64
	n := 0
	for i, data := range photos {
		full, err := Decode(data, 3, DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := Resize(full, 224, 224, Bilinear)
		got, err := DecodeResize(data, 3, 224, 224, Bilinear, DecodeOptions{ScaleHint: Size{224, 224}})
		if err != nil {
			t.Fatal(err)
		}
		// DCT-domain scaling is a sharper low-pass than PIL's antialiasing
		// filter, so fine textures (zebra, chain mail) differ most.
		mad := meanAbsDiff(got.Data, want.Data)
		if mad > 15 {
			t.Errorf("%s: DCT-scaled decode+resize differs from full decode+resize by %.3f, want <= 15", names[i], mad)
		}
		sum += mad
		worst = max(worst, mad)
		n++
	}
	t.Logf("%d photos: DCT-scaled vs full decode, after resize to 224x224: mean abs diff %.3f on average, %.3f worst", n, sum/float64(n), worst)
	if avg := sum / float64(n); avg > 3 {
		t.Errorf("DCT-scaled decode+resize differs from full decode+resize by %.3f on average, want <= 3", avg)
	}
}
