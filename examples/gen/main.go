// Command gen regenerates the quickstart dataset in examples/data: small
// 64×64 JPEG images of four shapes, as sharded TFRecord files of
// tf.train.Example and as an ImageFolder tree. The output is deterministic:
// running it again rewrites byte-identical files (for a given Go release,
// whose image/jpeg encoder produces the bytes).
//
// Usage, from the repository root:
//
//	go run ./examples/gen [-out examples/data]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/piperun/piperun/example"
	"github.com/piperun/piperun/tfrecord"
)

const (
	seed       = 20260415
	size       = 64
	quality    = 90
	trainCount = 1000
	trainShard = 4
	valCount   = 200
	// folderPerClass val images of each class also go to the ImageFolder
	// tree, which keeps that tree small while staying balanced.
	folderPerClass = 25
)

// classes are indexed by label. They are in sorted order so that the
// TFRecord labels equal the ones `labels: from_dir` derives from the
// ImageFolder tree, and one model works on both layouts.
var classes = []string{"circle", "cross", "square", "triangle"}

func main() {
	out := flag.String("out", filepath.Join("examples", "data"), "output directory")
	flag.Parse()
	files, err := generate(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %d files under %s\n", len(files), *out)
}

// sample is one generated image.
type sample struct {
	label int
	jpeg  []byte
}

// generate writes the dataset under dir and returns the paths it wrote,
// relative to dir, with forward slashes.
func generate(dir string) ([]string, error) {
	var written []string
	// Separate streams keep the validation set fixed if the training set
	// size ever changes.
	train := draw(rand.New(rand.NewPCG(seed, 1)), trainCount)
	val := draw(rand.New(rand.NewPCG(seed, 2)), valCount)

	per := trainCount / trainShard
	for s := range trainShard {
		name := fmt.Sprintf("shapes/train-%05d-of-%05d.tfrecord", s, trainShard)
		if err := writeShard(filepath.Join(dir, filepath.FromSlash(name)), train[s*per:(s+1)*per]); err != nil {
			return nil, err
		}
		written = append(written, name)
	}
	name := "shapes/val-00000-of-00001.tfrecord"
	if err := writeShard(filepath.Join(dir, filepath.FromSlash(name)), val); err != nil {
		return nil, err
	}
	written = append(written, name)

	count := make([]int, len(classes))
	for i, s := range val {
		if count[s.label] == folderPerClass {
			continue
		}
		count[s.label]++
		name := fmt.Sprintf("shapes-folder/%s/%03d.jpg", classes[s.label], i)
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, s.jpeg, 0o644); err != nil {
			return nil, err
		}
		written = append(written, name)
	}
	return written, nil
}

func draw(rng *rand.Rand, n int) []sample {
	out := make([]sample, n)
	var buf bytes.Buffer
	for i := range out {
		label := rng.IntN(len(classes))
		img := render(rng, label)
		buf.Reset()
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: quality}); err != nil {
			panic(err) // encoding into memory cannot fail
		}
		out[i] = sample{label: label, jpeg: bytes.Clone(buf.Bytes())}
	}
	return out
}

// render draws one shape of the given class over a noisy background.
func render(rng *rand.Rand, label int) *image.RGBA {
	bg := randColor(rng)
	fg := randColor(rng)
	// Redraw until the shape stands out; the count of draws is itself
	// deterministic, so the output stays reproducible.
	for dist(bg, fg) < 200 {
		fg = randColor(rng)
	}
	r := 10 + rng.Float64()*12
	cx := r + rng.Float64()*(size-2*r)
	cy := r + rng.Float64()*(size-2*r)
	noise := 8 + rng.IntN(20)

	img := image.NewRGBA(image.Rect(0, 0, size, size))
	for y := range size {
		for x := range size {
			c := bg
			if inside(label, float64(x)+0.5-cx, float64(y)+0.5-cy, r) {
				c = fg
			}
			img.SetRGBA(x, y, color.RGBA{
				R: jitter(rng, c.R, noise),
				G: jitter(rng, c.G, noise),
				B: jitter(rng, c.B, noise),
				A: 255,
			})
		}
	}
	return img
}

// inside reports whether the offset (dx, dy) from the centre is inside a
// shape of class label and radius r.
func inside(label int, dx, dy, r float64) bool {
	switch classes[label] {
	case "circle":
		return dx*dx+dy*dy <= r*r
	case "square":
		s := r * 0.8
		return dx >= -s && dx <= s && dy >= -s && dy <= s
	case "triangle":
		// Apex up at (0, -r), base from (-r, 0.8r) to (r, 0.8r).
		if dy < -r || dy > 0.8*r {
			return false
		}
		half := r * (dy + r) / (1.8 * r)
		return dx >= -half && dx <= half
	case "cross":
		arm := r / 3
		return (dx >= -r && dx <= r && dy >= -arm && dy <= arm) || (dy >= -r && dy <= r && dx >= -arm && dx <= arm)
	}
	return false
}

func randColor(rng *rand.Rand) color.RGBA {
	return color.RGBA{R: uint8(rng.IntN(256)), G: uint8(rng.IntN(256)), B: uint8(rng.IntN(256)), A: 255}
}

func dist(a, b color.RGBA) int {
	abs := func(x int) int { return max(x, -x) }
	return abs(int(a.R)-int(b.R)) + abs(int(a.G)-int(b.G)) + abs(int(a.B)-int(b.B))
}

func jitter(rng *rand.Rand, v uint8, n int) uint8 {
	return uint8(min(255, max(0, int(v)+rng.IntN(2*n+1)-n)))
}

func writeShard(path string, samples []sample) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	var buf bytes.Buffer
	w := tfrecord.NewWriter(&buf, tfrecord.None)
	for _, s := range samples {
		ex := &example.Example{Features: map[string]*example.Feature{
			"image/encoded":     {Kind: example.KindBytes, Bytes: [][]byte{s.jpeg}},
			"image/class/label": {Kind: example.KindInt64, Ints: []int64{int64(s.label)}},
			"image/class/text":  {Kind: example.KindBytes, Bytes: [][]byte{[]byte(classes[s.label])}},
			"image/height":      {Kind: example.KindInt64, Ints: []int64{size}},
			"image/width":       {Kind: example.KindInt64, Ints: []int64{size}},
		}}
		if err := w.Write(example.Marshal(ex)); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
