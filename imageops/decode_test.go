package imageops

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/png"
	"io"
	"math/rand"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/piperun/piperun/tensor"
)

type decodeFunc func([]byte, int, DecodeOptions) (*tensor.Tensor, error)

// decoders are the two JPEG backends; in a purego build both are image/jpeg.
var decoders = []struct {
	name string
	fn   decodeFunc
}{
	{"default-" + Backend, Decode},
	{"purego", DecodePureGo},
}

// badFiles are the shared files that must fail, with the sentinel and a
// fragment of the reason that both builds must report.
var badFiles = map[string]struct {
	err  error
	want string
}{
	"libjpeg-turbo/testimgari.jpg":   {ErrUnsupported, "arithmetic-coded jpeg (sof9)"},
	"corrupted-crlf/example_cat.jpg": {ErrCorrupt, "corrupt"},
	"corrupted-crlf/ducky_out5.jpg":  {ErrCorrupt, "corrupt"},
	"invalid-crc32.png":              {ErrCorrupt, "invalid checksum"},
	"invalid-trunc.png":              {ErrTruncated, "unexpected eof"},
}

var goDecodeRe = regexp.MustCompile(`^ok (jpeg|png) (\d+)x(\d+) (\w+)`)

// expectation derives the upright size and stored channel count Decode must
// return from a MANIFEST row.
func expectation(t *testing.T, r manifestRow) (h, w, c int) {
	t.Helper()
	m := goDecodeRe.FindStringSubmatch(r["go_image_decode"])
	if r["width"] != "" {
		w, _ = strconv.Atoi(r["width"])
		h, _ = strconv.Atoi(r["height"])
	} else if m != nil {
		w, _ = strconv.Atoi(m[2])
		h, _ = strconv.Atoi(m[3])
	} else {
		t.Fatalf("%s: no size in manifest", r["file"])
	}
	if o, _ := strconv.Atoi(r["exif_orientation"]); o >= 5 {
		h, w = w, h
	}
	c = 3
	switch {
	case r["components"] == "1":
		c = 1
	case m == nil:
	case strings.HasPrefix(m[4], "Gray"):
		c = 1
	case strings.HasPrefix(m[4], "NRGBA") && strings.HasPrefix(r["file"], "pngsuite/basn4a"):
		// PngSuite's color type 4, gray with alpha: Go's decoder gives
		// NRGBA, PIL mode LA and tf.io.decode_png 2 channels.
		c = 2
	case strings.HasPrefix(m[4], "NRGBA"), strings.Contains(r["file"], "trns"):
		c = 4
	}
	return h, w, c
}

func TestDecodeManifests(t *testing.T) {
	for _, sub := range []string{"photos/imagenet", "jpeg-edge", "png-edge"} {
		dir := sharedData(t, sub)
		for _, r := range readManifest(t, dir) {
			data := readFile(t, filepath.Join(dir, r["file"]))
			for _, d := range decoders {
				t.Run(sub+"/"+r["file"]+"/"+d.name, func(t *testing.T) {
					img, err := d.fn(data, 0, DecodeOptions{})
					if bad, ok := badFiles[r["file"]]; ok {
						if !errors.Is(err, bad.err) || !strings.Contains(strings.ToLower(fmt.Sprint(err)), bad.want) {
							t.Fatalf("err = %v, want %v mentioning %q", err, bad.err, bad.want)
						}
						if !strings.HasPrefix(err.Error(), "imageops: decode: ") {
							t.Errorf("error %q lacks the imageops: decode: prefix", err)
						}
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					h, w, c := expectation(t, r)
					if want := []int{h, w, c}; fmt.Sprint(img.Shape) != fmt.Sprint(want) || img.DType != tensor.Uint8 || len(img.Data) != h*w*c {
						t.Fatalf("got %v (%d bytes), want uint8%v", img, len(img.Data), want)
					}
					cfg, err := DecodeConfig(data)
					if err != nil || cfg.Height != h || cfg.Width != w || cfg.Channels != c {
						t.Errorf("DecodeConfig = %+v, %v; want %dx%dx%d", cfg, err, h, w, c)
					}
				})
			}
		}
	}
}

func meanAbsDiff(a, b []byte) float64 {
	var s int64
	for i := range a {
		d := int64(a[i]) - int64(b[i])
		if d < 0 {
			d = -d
		}
		s += d
	}
	return float64(s) / float64(len(a))
}

func maxAbsDiff(a, b []byte) int {
	m := 0
	for i := range a {
		d := int(a[i]) - int(b[i])
		if d < 0 {
			d = -d
		}
		m = max(m, d)
	}
	return m
}

// TestEXIFOrientation checks that all nine Landscape files, stored in eight
// orientations, come out as the same upright 1800×1200 picture.
func TestEXIFOrientation(t *testing.T) {
	dir := sharedData(t, "jpeg-edge/exif-orientation")
	for _, d := range decoders {
		ref, err := d.fn(readFile(t, filepath.Join(dir, "Landscape_1.jpg")), 3, DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for o := 0; o <= 8; o++ {
			name := fmt.Sprintf("Landscape_%d.jpg", o)
			img, err := d.fn(readFile(t, filepath.Join(dir, name)), 3, DecodeOptions{})
			if err != nil {
				t.Fatalf("%s %s: %v", d.name, name, err)
			}
			if fmt.Sprint(img.Shape) != "[1200 1800 3]" {
				t.Fatalf("%s %s: shape %v, want [1200 1800 3]", d.name, name, img.Shape)
			}
			// Each file was encoded separately, so allow JPEG noise: the right
			// orientation measured 0.4-3.7 levels, every wrong rotation or
			// mirror 73-88.
			if mad := meanAbsDiff(img.Data, ref.Data); mad > 6 {
				t.Errorf("%s %s: mean abs diff %.2f from Landscape_1, want <= 6 (wrong orientation?)", d.name, name, mad)
			}
		}
	}
}

// tiff builds a minimal TIFF IFD0 holding one orientation entry.
func tiff(bo binary.ByteOrder, typ uint16, v uint32) []byte {
	var b bytes.Buffer
	if bo == binary.LittleEndian {
		b.WriteString("II*\x00")
	} else {
		b.WriteString("MM\x00*")
	}
	binary.Write(&b, bo, uint32(8))
	binary.Write(&b, bo, uint16(2))
	// An unrelated tag first, so the scan has to walk entries.
	binary.Write(&b, bo, []uint16{0x010f, 2})
	binary.Write(&b, bo, []uint32{4, 0})
	binary.Write(&b, bo, []uint16{0x0112, typ})
	binary.Write(&b, bo, uint32(1))
	switch typ {
	case 3:
		binary.Write(&b, bo, []uint16{uint16(v), 0})
	default:
		binary.Write(&b, bo, v)
	}
	return b.Bytes()
}

func TestEXIFParse(t *testing.T) {
	cases := []struct {
		name string
		b    []byte
		want int
	}{
		{"le short 6", tiff(binary.LittleEndian, 3, 6), 6},
		{"be short 8", tiff(binary.BigEndian, 3, 8), 8},
		{"le long 3", tiff(binary.LittleEndian, 4, 3), 3},
		{"invalid 0", tiff(binary.BigEndian, 3, 0), 1},
		{"invalid 9", tiff(binary.LittleEndian, 3, 9), 1},
		{"bad type", tiff(binary.LittleEndian, 5, 6), 1},
		{"truncated", tiff(binary.LittleEndian, 3, 6)[:20], 1},
		{"bad magic", []byte("XX*\x00\x08\x00\x00\x00"), 1},
		{"empty", nil, 1},
	}
	for _, c := range cases {
		if got := exifOrientation(c.b); got != c.want {
			t.Errorf("%s: orientation %d, want %d", c.name, got, c.want)
		}
	}
}

func TestDecodeChannels(t *testing.T) {
	dir := sharedData(t, "jpeg-edge/go-image-testdata")
	pdir := sharedData(t, "png-edge/pngsuite")
	cases := []struct {
		file  string
		ch    int
		want  int
		alpha bool // channel 4 must be opaque
	}{
		{dir + "/video-001.jpeg", 0, 3, false},
		{dir + "/video-001.jpeg", 1, 1, false},
		{dir + "/video-001.jpeg", 4, 4, true},
		{dir + "/video-005.gray.jpeg", 0, 1, false},
		{dir + "/video-005.gray.jpeg", 3, 3, false},
		{dir + "/video-001.cmyk.jpeg", 1, 1, false},
		{dir + "/video-001.cmyk.jpeg", 4, 4, true},
		{pdir + "/basn6a08.png", 0, 4, false},
		{pdir + "/basn6a08.png", 3, 3, false},
		{pdir + "/basn0g16.png", 3, 3, false},
		{pdir + "/basn3p08.png", 4, 4, true},
	}
	for _, c := range cases {
		for _, d := range decoders {
			img, err := d.fn(readFile(t, c.file), c.ch, DecodeOptions{})
			if err != nil {
				t.Fatalf("%s %s ch=%d: %v", d.name, c.file, c.ch, err)
			}
			if img.Shape[2] != c.want {
				t.Errorf("%s %s ch=%d: %v, want %d channels", d.name, c.file, c.ch, img.Shape, c.want)
			}
			if c.alpha {
				for i := 3; i < len(img.Data); i += 4 {
					if img.Data[i] != 255 {
						t.Fatalf("%s %s: alpha %d at %d, want opaque", d.name, c.file, img.Data[i], i)
					}
				}
			}
			if c.ch == 3 && strings.Contains(c.file, "gray") {
				for i := 0; i < len(img.Data); i += 3 {
					if img.Data[i] != img.Data[i+1] || img.Data[i] != img.Data[i+2] {
						t.Fatalf("%s %s: gray expanded to unequal channels", d.name, c.file)
					}
				}
			}
		}
	}
	if _, err := Decode(readFile(t, dir+"/video-001.jpeg"), 2, DecodeOptions{}); !errors.Is(err, ErrArgument) {
		t.Errorf("channels=2: err %v, want ErrArgument", err)
	}
}

// TestDecodeReferencePNG compares the decoders against the PNG references
// that ship with Go's image/jpeg tests, including Adobe CMYK and RGB.
func TestDecodeReferencePNG(t *testing.T) {
	dir := sharedData(t, "jpeg-edge/go-image-testdata")
	for _, name := range []string{"video-001", "video-001.cmyk", "video-001.rgb", "video-005.gray", "video-001.progressive"} {
		png := name
		if name == "video-001.progressive" {
			png = "video-001"
		}
		ref, err := Decode(readFile(t, filepath.Join(dir, png+".png")), 0, DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range decoders {
			img, err := d.fn(readFile(t, filepath.Join(dir, name+".jpeg")), 0, DecodeOptions{})
			if err != nil {
				t.Fatalf("%s %s: %v", d.name, name, err)
			}
			mad := meanAbsDiff(img.Data, ref.Data)
			if name == "video-001.rgb" && d.name != "purego" {
				// The reference is image/jpeg's output, which replicates the
				// subsampled G and B planes; libjpeg interpolates them
				// (differing by ~4 levels). TestDecodeMatchesDjpeg covers it.
				continue
			}
			t.Logf("%s %s: mean abs diff %.3f from the png reference", d.name, name, mad)
			if mad > 2.5 {
				t.Errorf("%s %s: mean abs diff %.3f from the png reference, want <= 2.5", d.name, name, mad)
			}
		}
	}
}

func TestDecodeTruncated(t *testing.T) {
	_, photos := photos(t)
	full := photos[0]
	cut := full[:len(full)/2]
	for _, d := range decoders {
		_, err := d.fn(cut, 3, DecodeOptions{})
		if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), "no end-of-image marker") {
			t.Errorf("%s strict: err %v, want ErrTruncated naming the missing end-of-image marker", d.name, err)
		}
	}
	// Lenient libjpeg-turbo recovers the top half and greys the rest;
	// image/jpeg cannot recover and still fails, with a reason.
	img, err := Decode(cut, 3, DecodeOptions{Lenient: true})
	if Backend == "libjpeg-turbo" {
		if err != nil {
			t.Fatalf("lenient: %v", err)
		}
		ref, _ := Decode(full, 3, DecodeOptions{})
		if img.Shape[0] != ref.Shape[0] || img.Shape[1] != ref.Shape[1] {
			t.Fatalf("lenient shape %v, want %v", img.Shape, ref.Shape)
		}
		row := ref.Shape[1] * 3
		if mad := meanAbsDiff(img.Data[:row*10], ref.Data[:row*10]); mad != 0 {
			t.Errorf("lenient: first rows differ from the full decode by %.2f", mad)
		}
	}
	if _, err := DecodePureGo(cut, 3, DecodeOptions{Lenient: true}); !errors.Is(err, ErrTruncated) {
		t.Errorf("purego lenient: err %v, want ErrTruncated", err)
	}
	// Go's truncated progressive test file is a complete file whose later
	// scans are missing; both decoders return the coarse image without error.
	dir := sharedData(t, "jpeg-edge/go-image-testdata")
	for _, d := range decoders {
		if _, err := d.fn(readFile(t, dir+"/video-001.progressive.truncated.jpeg"), 0, DecodeOptions{}); err != nil {
			t.Errorf("%s progressive.truncated: %v", d.name, err)
		}
	}
}

// patchSOF rewrites the frame header of a copy of a JPEG; fn sees the
// marker byte, the length, then the header fields.
func patchSOF(t *testing.T, data []byte, fn func(seg []byte)) []byte {
	t.Helper()
	out := append([]byte(nil), data...)
	for i := 2; i+4 < len(out); {
		if out[i] != 0xff {
			t.Fatal("lost marker sync")
		}
		m := out[i+1]
		n := int(binary.BigEndian.Uint16(out[i+2:]))
		if m == 0xc0 || m == 0xc1 || m == 0xc2 {
			fn(out[i+1 : i+2+n])
			return out
		}
		i += 2 + n
	}
	t.Fatal("no sof")
	return nil
}

func TestDecodeUnsupported(t *testing.T) {
	dir := sharedData(t, "jpeg-edge/libjpeg-turbo")
	orig := readFile(t, filepath.Join(dir, "testorig.jpg"))
	cases := []struct {
		name string
		data []byte
		err  error
		want string
	}{
		{"12-bit", patchSOF(t, orig, func(s []byte) { s[3] = 12 }), ErrUnsupported, "12-bit jpeg"},
		{"lossless", patchSOF(t, orig, func(s []byte) { s[0] = 0xc3 }), ErrUnsupported, "lossless"},
		{"dnl height", patchSOF(t, orig, func(s []byte) { s[4], s[5] = 0, 0 }), ErrUnsupported, "dnl"},
		{"two components", patchSOF(t, orig, func(s []byte) { s[8] = 2 }), ErrUnsupported, "2 components"},
		{"not an image", []byte("GIF89a........"), ErrFormat, "want jpeg or png"},
		{"empty", nil, ErrFormat, "unknown image format: the image bytes are empty (0 bytes: an empty file, or an empty feature)"},
		{"soi only", []byte{0xff, 0xd8}, ErrTruncated, "header ends"},
		{"header cut", orig[:100], ErrTruncated, "jpeg header ends"},
		{"png signature only", pngMagic, ErrTruncated, "ihdr"},
	}
	for _, c := range cases {
		for _, d := range decoders {
			_, err := d.fn(c.data, 0, DecodeOptions{})
			if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s %s: err %v, want %v mentioning %q", d.name, c.name, err, c.err, c.want)
			}
		}
	}
}

// TestCutPNGIsTruncated: a PNG cut anywhere after its header is
// ErrTruncated, not ErrCorrupt, wherever the cut falls (a
// file cut inside its pixel data was "corrupt image: not enough pixel
// data", and the suite's invalid-trunc.png "truncated").
func TestCutPNGIsTruncated(t *testing.T) {
	var buf bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 64, 48))
	for i := range img.Pix {
		img.Pix[i] = byte(i * 7)
	}
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	whole := buf.Bytes()
	if !bytes.HasSuffix(whole, []byte("IEND\xaeB`\x82")) {
		t.Fatal("the encoded PNG does not end with IEND")
	}
	for _, d := range decoders {
		if _, err := d.fn(whole, 3, DecodeOptions{}); err != nil {
			t.Fatalf("%s: the whole file: %v", d.name, err)
		}
		for cut := 40; cut < len(whole); cut += 37 {
			_, err := d.fn(whole[:cut], 3, DecodeOptions{})
			if !errors.Is(err, ErrTruncated) {
				t.Errorf("%s: cut at %d of %d bytes: err %v, want ErrTruncated", d.name, cut, len(whole), err)
			}
		}
		// Damaged pixel data with bytes after IEND, which image/png
		// ignores, is corrupt, not cut.
		damaged := bytes.Clone(whole)
		idat := bytes.Index(damaged, []byte("IDAT"))
		for i := idat + 6; i < idat+40; i++ {
			damaged[i] ^= 0x5a
		}
		damaged = append(damaged, make([]byte, 16)...)
		if _, err := d.fn(damaged, 3, DecodeOptions{}); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: damaged pixel data and 16 bytes after IEND: err %v, want ErrCorrupt", d.name, err)
		}
	}
}

// bombJPEG and bombPNG are small files whose headers declare 60000×60000.
func bombJPEG(t *testing.T) []byte {
	dir := sharedData(t, "jpeg-edge/libjpeg-turbo")
	return patchSOF(t, readFile(t, filepath.Join(dir, "testorig.jpg")), func(s []byte) {
		binary.BigEndian.PutUint16(s[4:], 60000)
		binary.BigEndian.PutUint16(s[6:], 60000)
	})
}

func bombPNG() []byte {
	var b bytes.Buffer
	b.Write(pngMagic)
	chunk := func(typ string, body []byte) {
		binary.Write(&b, binary.BigEndian, uint32(len(body)))
		c := append([]byte(typ), body...)
		b.Write(c)
		binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(c))
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr, 60000)
	binary.BigEndian.PutUint32(ihdr[4:], 60000)
	ihdr[8], ihdr[9] = 8, 2
	chunk("IHDR", ihdr)
	chunk("IDAT", []byte{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01})
	chunk("IEND", nil)
	return b.Bytes()
}

func TestDecompressionBomb(t *testing.T) {
	for name, data := range map[string][]byte{"jpeg": bombJPEG(t), "png": bombPNG()} {
		for _, d := range decoders {
			_, err := d.fn(data, 3, DecodeOptions{})
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "60000x60000 (width×height) is 3600000000 pixels, over the limit of 178956970") {
				t.Fatalf("%s %s: err %v, want ErrTooLarge with the sizes", d.name, name, err)
			}
			// Refused from the header: a few small allocations (the error),
			// nowhere near a 10 GB frame. Bytes rather than a count of
			// allocations, which the race detector inflates.
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for i := 0; i < 5; i++ {
				d.fn(data, 3, DecodeOptions{})
			}
			runtime.ReadMemStats(&after)
			if got := (after.TotalAlloc - before.TotalAlloc) / 5; got > 64<<10 {
				t.Errorf("%s %s: %d bytes allocated to refuse a bomb, want <= 64 KiB", d.name, name, got)
			}
		}
	}
	// MaxPixels is honoured both ways.
	_, photos := photos(t)
	if _, err := Decode(photos[0], 3, DecodeOptions{MaxPixels: 1000}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("MaxPixels 1000: err %v, want ErrTooLarge", err)
	}
	if _, err := Decode(photos[0], 3, DecodeOptions{MaxPixels: 500 * 375}); err != nil {
		t.Errorf("MaxPixels exactly the size: %v", err)
	}
	if _, err := Decode(photos[0], 3, DecodeOptions{MaxPixels: -1}); err != nil {
		t.Errorf("MaxPixels -1 (no limit): %v", err)
	}
}

func TestDecodeCropAndScale(t *testing.T) {
	names, photos := photos(t)
	for i := 0; i < len(photos); i += 20 {
		full, err := Decode(photos[i], 3, DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		h, w := full.Shape[0], full.Shape[1]
		r := Rect{Y: h / 5, X: w / 3, H: h / 2, W: w / 3}
		got, err := Decode(photos[i], 3, DecodeOptions{Crop: &r})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := Crop(full, r.Y, r.X, r.H, r.W)
		if fmt.Sprint(got.Shape) != fmt.Sprint(want.Shape) {
			t.Fatalf("%s: cropped decode %v, want %v", names[i], got.Shape, want.Shape)
		}
		if m := maxAbsDiff(got.Data, want.Data); m > 0 {
			rw := r.W * 3
			bad := map[int]int{}
			for k := range got.Data {
				if got.Data[k] != want.Data[k] {
					bad[k/rw]++
				}
			}
			t.Errorf("%s: cropped decode differs from decode then crop by up to %d, mean %.3f; rows %v", names[i], m, meanAbsDiff(got.Data, want.Data), bad)
		}
		for _, hint := range []Size{{224, 224}, {100, 60}, {20, 20}, {h, w}} {
			img, err := Decode(photos[i], 3, DecodeOptions{ScaleHint: hint})
			if err != nil {
				t.Fatal(err)
			}
			if img.Shape[0] < hint.H || img.Shape[1] < hint.W {
				t.Errorf("%s hint %v: scaled to %v, below the hint", names[i], hint, img.Shape)
			}
			d := pickScale(h, w, hint)
			if Backend == "libjpeg-turbo" && (img.Shape[0] != scaled(h, d) || img.Shape[1] != scaled(w, d)) {
				t.Errorf("%s hint %v: %v, want %d/8 scale", names[i], hint, img.Shape, d)
			}
			c, err := Decode(photos[i], 3, DecodeOptions{ScaleHint: hint, Crop: &r})
			if err != nil {
				t.Fatal(err)
			}
			if c.Shape[0] < min(hint.H, r.H*d/8) || c.Shape[1] < min(hint.W, r.W*d/8) {
				t.Errorf("%s hint %v crop %v: %v too small", names[i], hint, r, c.Shape)
			}
		}
	}
	if _, err := Decode(photos[0], 3, DecodeOptions{Crop: &Rect{Y: 300, X: 0, H: 100, W: 10}}); !errors.Is(err, ErrArgument) {
		t.Errorf("crop outside image: err %v, want ErrArgument", err)
	}
}

func TestPickScale(t *testing.T) {
	cases := []struct {
		h, w int
		hint Size
		want int
	}{
		{375, 500, Size{224, 224}, 5},
		{358, 500, Size{224, 224}, 6},
		{250, 250, Size{224, 224}, 8},
		{1200, 1800, Size{224, 224}, 2},
		{1800, 1800, Size{224, 224}, 1},
		{1791, 1800, Size{224, 224}, 2},
		{448, 448, Size{224, 224}, 4},
		{447, 448, Size{224, 224}, 5},
		{1000, 1000, Size{}, 8},
	}
	for _, c := range cases {
		if got := pickScale(c.h, c.w, c.hint); got != c.want {
			t.Errorf("pickScale(%d, %d, %v) = %d, want %d", c.h, c.w, c.hint, got, c.want)
		}
	}
}

// TestCroppedDecodeExact checks that decoding only a window (libjpeg's
// partial decode in cgo builds) gives exactly the pixels of a full decode
// cropped afterwards, at full and DCT-reduced scale, on every photo.
func TestCroppedDecodeExact(t *testing.T) {
	names, photos := photos(t)
	rng := rand.New(rand.NewSource(3))
	step := 1
	if Backend != "libjpeg-turbo" {
		step = 10 // image/jpeg decodes every window in full; keep it quick
	}
	for i := 0; i < len(photos); i += step {
		data := photos[i]
		for _, hint := range []Size{{}, {56, 56}} {
			full, err := Decode(data, 0, DecodeOptions{ScaleHint: hint})
			if err != nil {
				t.Fatal(err)
			}
			cfg, _ := DecodeConfig(data)
			windows := []Rect{
				RandomResizedCropWindow(cfg.Height, cfg.Width, 0, 0, rng),
				RandomResizedCropWindow(cfg.Height, cfg.Width, 0, 0, rng),
				{Y: 0, X: 0, H: cfg.Height / 2, W: cfg.Width / 2},
				{Y: cfg.Height / 3, X: cfg.Width / 3, H: cfg.Height - cfg.Height/3, W: cfg.Width - cfg.Width/3},
				{Y: 0, X: 0, H: cfg.Height, W: cfg.Width},
			}
			for _, r := range windows {
				got, err := Decode(data, 0, DecodeOptions{ScaleHint: hint, Crop: &r})
				if err != nil {
					t.Fatal(err)
				}
				d := pickScale(r.H, r.W, hint)
				if Backend != "libjpeg-turbo" {
					d = 8
				}
				ref := full
				if pickScale(cfg.Height, cfg.Width, hint) != d {
					// The window shrinks less than the whole image would.
					info, _ := scanJPEG(data)
					pix, h, w, err := defaultJPEG(data, &info, cfg.Channels, d, makeBytes, false)
					if err != nil {
						t.Fatal(err)
					}
					ref = &tensor.Tensor{DType: tensor.Uint8, Shape: []int{h, w, cfg.Channels}, Data: pix}
				}
				sr := scaleRect(r, d, ref.Shape[0], ref.Shape[1])
				want, err := Crop(ref, sr.Y, sr.X, sr.H, sr.W)
				if err != nil {
					t.Fatal(err)
				}
				if !tensor.Equal(got, want) {
					t.Fatalf("%s hint %v window %+v: cropped decode %v differs from cropped full decode %v (max %d)",
						names[i], hint, r, got.Shape, want.Shape, maxAbsDiff(got.Data, want.Data))
				}
			}
		}
	}
}

// TestCropWithOrientation checks that a Crop window is taken from the
// upright image, for every EXIF orientation, with and without DCT scaling.
func TestCropWithOrientation(t *testing.T) {
	dir := sharedData(t, "jpeg-edge/exif-orientation")
	r := Rect{Y: 100, X: 300, H: 700, W: 900}
	for o := 1; o <= 8; o++ {
		data := readFile(t, filepath.Join(dir, fmt.Sprintf("Landscape_%d.jpg", o)))
		for _, hint := range []Size{{}, {100, 100}} {
			// The window's scale follows from the window (2/8 here); decode
			// the whole image at that scale for the reference.
			num := pickScale(r.H, r.W, hint)
			if Backend != "libjpeg-turbo" {
				num = 8
			}
			var fullHint Size
			if num != 8 {
				fullHint = Size{1200 * num / 8, 1800 * num / 8}
			}
			full, err := Decode(data, 3, DecodeOptions{ScaleHint: fullHint})
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(data, 3, DecodeOptions{Crop: &r, ScaleHint: hint})
			if err != nil {
				t.Fatal(err)
			}
			sr := scaleRect(r, num, full.Shape[0], full.Shape[1])
			want, _ := Crop(full, sr.Y, sr.X, sr.H, sr.W)
			if !tensor.Equal(got, want) {
				t.Errorf("Landscape_%d hint %v: cropped decode %v differs from crop of the upright decode %v", o, hint, got.Shape, want.Shape)
			}
		}
	}
}

// TestDecodeScanLimit repeats the last scan of a progressive file 600
// times: libjpeg warns of a bogus progression (an error unless lenient) and
// then, lenient or not, the decoder refuses the 501st scan rather than
// spend time proportional to the scan count on a small file.
func TestDecodeScanLimit(t *testing.T) {
	if Backend != "libjpeg-turbo" {
		t.Skip("image/jpeg has no scan limit")
	}
	orig := readFile(t, sharedData(t, "jpeg-edge/go-image-testdata")+"/video-001.progressive.jpeg")
	last := bytes.LastIndex(orig, []byte{0xff, 0xda})
	if last < 0 || !bytes.HasSuffix(orig, []byte{0xff, 0xd9}) {
		t.Fatal("no final scan followed by EOI")
	}
	scan := orig[last : len(orig)-2]
	data := append([]byte(nil), orig[:len(orig)-2]...)
	for i := 0; i < 600; i++ {
		data = append(data, scan...)
	}
	data = append(data, 0xff, 0xd9)
	cfg, err := DecodeConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	crop := &Rect{Y: cfg.Height / 4, X: cfg.Width / 4, H: cfg.Height / 2, W: cfg.Width / 2}
	for _, opts := range []DecodeOptions{{Lenient: true}, {Lenient: true, Crop: crop}, {}} {
		_, err := Decode(data, 3, opts)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("lenient %v crop %v: err %v, want ErrCorrupt", opts.Lenient, opts.Crop != nil, err)
		} else if opts.Lenient && !strings.Contains(err.Error(), "more than 500 scans") {
			t.Errorf("lenient crop %v: err %v, want the scan limit", opts.Crop != nil, err)
		}
	}
}

// TestDecodeErrorNamesItsFile decodes two files damaged differently (5 and
// 9 stray bytes before the end-of-image marker) from several goroutines:
// each error must name that file's own damage. The message is kept with
// the decompressor, not in thread-local storage that a goroutine can
// migrate away from between two cgo calls. (The entropy decoder has already
// read 2 of the stray bytes when it finds the marker, so libjpeg, like
// djpeg, counts 3 and 7.)
func TestDecodeErrorNamesItsFile(t *testing.T) {
	if Backend != "libjpeg-turbo" {
		t.Skip("image/jpeg ignores stray bytes before the end-of-image marker")
	}
	orig := readFile(t, sharedData(t, "jpeg-edge/go-image-testdata")+"/video-001.jpeg")
	damaged := func(n int) []byte {
		d := append([]byte(nil), orig[:len(orig)-2]...)
		d = append(d, bytes.Repeat([]byte{0x55}, n)...)
		return append(d, 0xff, 0xd9)
	}
	files := map[int][]byte{5: damaged(5), 9: damaged(9)}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				n := 5 + 4*((g+i)%2)
				_, err := Decode(files[n], 3, DecodeOptions{})
				want := fmt.Sprintf("corrupt jpeg data: %d extraneous bytes before marker 0xd9", n-2)
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(strings.ToLower(fmt.Sprint(err)), want) {
					t.Errorf("%d bytes: err %v, want ErrCorrupt with %q", n, err, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestGrayAlphaPNGAsStored: a gray+alpha PNG (PngSuite's basn4a08 and its
// 16-bit twin) decodes at channels 0 to two channels, gray then alpha, as
// tf.io.decode_png and PIL's mode LA give it; they are the gray and alpha
// of the RGBA decode, and the resize of the two channels is exactly the
// resize of those two channels of the RGBA image.
func TestGrayAlphaPNGAsStored(t *testing.T) {
	dir := sharedData(t, "png-edge")
	for _, f := range []string{"pngsuite/basn4a08.png", "pngsuite/basn4a16.png"} {
		data := readFile(t, filepath.Join(dir, f))
		ga, err := Decode(data, 0, DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rgba, err := Decode(data, 4, DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(ga.Shape) != "[32 32 2]" {
			t.Fatalf("%s: shape %v, want [32 32 2]", f, ga.Shape)
		}
		alphas := map[byte]bool{}
		for i := range 32 * 32 {
			p, q := ga.Data[2*i:2*i+2], rgba.Data[4*i:4*i+4]
			if p[0] != q[0] || q[0] != q[1] || q[1] != q[2] || p[1] != q[3] {
				t.Fatalf("%s pixel %d: gray+alpha %v, RGBA %v", f, i, p, q)
			}
			alphas[p[1]] = true
		}
		if len(alphas) < 8 {
			t.Errorf("%s: only %d distinct alphas: not the image's alpha ramp", f, len(alphas))
		}
		small, err := Resize(ga, 13, 9, Bilinear)
		if err != nil {
			t.Fatal(err)
		}
		smallRGBA, err := Resize(rgba, 13, 9, Bilinear)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 13 * 9 {
			if small.Data[2*i] != smallRGBA.Data[4*i] || small.Data[2*i+1] != smallRGBA.Data[4*i+3] {
				t.Fatalf("%s: resized pixel %d: %v, RGBA %v", f, i, small.Data[2*i:2*i+2], smallRGBA.Data[4*i:4*i+4])
			}
		}
	}
}

// rgbKeyPNG writes a 2×1 8-bit truecolor PNG whose tRNS chunk makes its
// first pixel's colour transparent.
func rgbKeyPNG() []byte {
	return keyPNG(8, []byte{0, 10, 0, 20, 0, 30}, []byte{0, 10, 20, 30, 40, 50, 60}) // filter 0, then (10,20,30) (40,50,60)
}

// keyPNG writes a 2×1 truecolor PNG of the given bit depth with a tRNS
// key and one filtered scanline.
func keyPNG(depth byte, key, line []byte) []byte {
	var out bytes.Buffer
	chunk := func(typ string, data []byte) {
		binary.Write(&out, binary.BigEndian, uint32(len(data)))
		crc := crc32.NewIEEE()
		io.WriteString(crc, typ)
		crc.Write(data)
		out.WriteString(typ)
		out.Write(data)
		binary.Write(&out, binary.BigEndian, crc.Sum32())
	}
	out.WriteString("\x89PNG\r\n\x1a\n")
	chunk("IHDR", []byte{0, 0, 0, 2, 0, 0, 0, 1, depth, 2, 0, 0, 0})
	chunk("tRNS", key)
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(line)
	zw.Close()
	chunk("IDAT", z.Bytes())
	chunk("IEND", nil)
	return out.Bytes()
}

// TestRGBKeyPNGAsStored: a truecolor PNG with a transparency key decodes
// at channels 0 to its 3 colour channels, as tf.io.decode_png and PIL
// ("RGB", the key kept aside) give it; asking for 4 gives the key's
// pixel alpha 0.
func TestRGBKeyPNGAsStored(t *testing.T) {
	data := rgbKeyPNG()
	for _, tc := range []struct {
		channels int
		want     string
	}{{0, "[1 2 3] [10 20 30 40 50 60]"}, {3, "[1 2 3] [10 20 30 40 50 60]"}, {4, "[1 2 4] [10 20 30 0 40 50 60 255]"}} {
		img, err := Decode(data, tc.channels, DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(img.Shape, " ", img.Data); got != tc.want {
			t.Errorf("channels %d: %s, want %s", tc.channels, got, tc.want)
		}
	}
	if cfg, err := DecodeConfig(data); err != nil || cfg.Channels != 3 {
		t.Errorf("DecodeConfig: %+v, %v; want 3 channels", cfg, err)
	}
}

// TestRGBKey16PNG: a 16-bit truecolor PNG's transparency key is matched
// on all 16 bits, as libpng's tRNS-to-alpha (tf.io.decode_png) does, and
// the colours come out as their high bytes. The second pixel of the
// second file matches the key only in its high bytes and stays opaque
// (PIL's convert("RGBA") compares 8-bit values and leaves both opaque).
func TestRGBKey16PNG(t *testing.T) {
	key := []byte{0x0a, 0x0b, 0x14, 0x15, 0x1e, 0x1f}
	for _, tc := range []struct {
		line []byte
		want map[int]string
	}{
		{[]byte{0, 0x0a, 0x0b, 0x14, 0x15, 0x1e, 0x1f, 0x28, 0x29, 0x32, 0x33, 0x3c, 0x3d},
			map[int]string{0: "[1 2 3] [10 20 30 40 50 60]", 4: "[1 2 4] [10 20 30 0 40 50 60 255]"}},
		{[]byte{0, 0x28, 0x29, 0x32, 0x33, 0x3c, 0x3d, 0x0a, 0x00, 0x14, 0x00, 0x1e, 0x00},
			map[int]string{0: "[1 2 3] [40 50 60 10 20 30]", 4: "[1 2 4] [40 50 60 255 10 20 30 255]"}},
	} {
		data := keyPNG(16, key, tc.line)
		for _, channels := range []int{0, 4} {
			img, err := Decode(data, channels, DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(img.Shape, " ", img.Data); got != tc.want[channels] {
				t.Errorf("channels %d: %s, want %s", channels, got, tc.want[channels])
			}
		}
	}
}
