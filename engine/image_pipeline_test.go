package engine_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/piperun/piperun/engine"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// TestImageEdgeFilesThroughPipeline decodes every edge-case JPEG and PNG of
// shared/data through a files → map pipeline. With on_error: skip, exactly
// the damaged and unsupported files are skipped, each cause naming the
// file and the reason; every other image comes out upright with its
// manifest's dimensions.
func TestImageEdgeFilesThroughPipeline(t *testing.T) {
	data := tfrSharedData(t)
	dir := t.TempDir()
	spec := fmt.Sprintf(`
version: 1
name: edges
stages:
  - {name: files, type: files, patterns: [%q, %q]}
  - name: decode
    type: map
    on_error: skip
    set:
      img: 'decode_image(read_file(path), 3)'
      hw: 'shape(img)'
    keep: [path, hw]
  - {name: out, type: write_jsonl, path: out.jsonl}
`, filepath.Join(data, "jpeg-edge", "**", "*.jp*g"), filepath.Join(data, "png-edge", "**", "*.png"))
	rep, err := runSpec(t, dir, spec)
	if err != nil {
		t.Fatal(err)
	}
	// The CRLF-damaged pair and the arithmetic-coded file cannot be
	// decoded; the PNG suite's two broken files neither.
	wantBad := []string{"ducky_out5.jpg", "example_cat.jpg", "invalid-crc32.png", "invalid-trunc.png", "testimgari.jpg"}
	var bad []string
	for _, c := range rep.SkipCauses["decode"] {
		for _, w := range wantBad {
			if strings.Contains(c, "/"+w+":") {
				bad = append(bad, w)
			}
		}
	}
	sort.Strings(bad)
	if rep.Skipped["decode"] != int64(len(wantBad)) || strings.Join(bad, " ") != strings.Join(wantBad, " ") {
		t.Fatalf("skipped %d: %q\nwant %v", rep.Skipped["decode"], rep.SkipCauses["decode"], wantBad)
	}
	for _, c := range rep.SkipCauses["decode"] {
		// Where the spec sets the field, the function it called, then
		// why, in no package's name.
		if !strings.Contains(c, ": set img ("+filepath.Join(dir, "spec.yaml")+":10:12): decode_image: ") || strings.Contains(c, "imageops") {
			t.Errorf("cause without a reason: %s", c)
		}
	}
	got := map[string]string{}
	for _, l := range readLines(t, filepath.Join(dir, "out.jsonl")) {
		var m struct {
			Path string
			HW   []int `json:"hw"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		got[filepath.Base(m.Path)] = fmt.Sprint(m.HW)
	}
	for name, want := range map[string]string{
		"Landscape_0.jpg": "[1200 1800 3]", "Landscape_5.jpg": "[1200 1800 3]", "Landscape_8.jpg": "[1200 1800 3]",
		"video-001.cmyk.jpeg": "[103 150 3]", "video-005.gray.jpeg": "[103 150 3]", "testorig.jpg": "[149 227 3]",
		"basn0g16.png": "[32 32 3]", "basn3p08.png": "[32 32 3]",
	} {
		if got[name] != want {
			t.Errorf("%s: shape %s, want %s", name, got[name], want)
		}
	}
}

// TestDeferredToFloatIsExact: with the map's to_float and normalize left to
// the batch (map → shuffle → batch, kept as written by optimize: false),
// the batches are bit for bit those of the same pipeline converting in the
// map (a filter reading the image in between stops the deferral), over two
// epochs with random crops and a short last batch.
func TestDeferredToFloatIsExact(t *testing.T) {
	dir := t.TempDir()
	for i := range 10 {
		writeJPEG(t, filepath.Join(dir, fmt.Sprintf("img%02d.jpg", i)), 40+7*i, 30+5*i, int64(i))
	}
	run := func(name, between string) (string, string) {
		spec := `
version: 1
name: ` + name + `
seed: 7
epochs: 2
optimize: false
stages:
  - {name: files, type: files, pattern: '*.jpg', shuffle: true}
  - name: decode
    type: map
    parallelism: 2
    set:
      plain: 'decode_image(read_file(path), 3) | resize(12, 12) | to_float()'
      image: 'decode_image(read_file(path), 3) | random_resized_crop(16, 16) | flip_left_right(0.5) | to_float() | normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])'
      gray: 'decode_image(read_file(path), 1) | resize(9, 9) | to_float() | normalize(0.5, 0.25)'
` + between + `
  - {name: shuffle, type: shuffle, buffer: 6}
  - {name: batch, type: batch, size: 4}
  - {name: out, type: write_jsonl, path: ` + name + `.jsonl}
`
		sp := parseSpec(t, dir, spec)
		typ, _ := sp.Stage("decode").Schema.Lookup("image")
		if _, err := runSpec(t, dir, spec); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, name+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b), typ.String()
	}
	deferred, dt := run("deferred", "")
	direct, it := run("direct", "  - {name: keep, type: filter, where: 'shape(image)[0] > 0'}")
	if dt != "tensor<uint8→float32>[16 16 3]" || it != "tensor<float32>[16 16 3]" {
		t.Fatalf("decode emits %s and %s; want the first deferred, the second not", dt, it)
	}
	if n := strings.Count(deferred, "\n"); n != 6 {
		t.Fatalf("%d batches, want 6 (3 per epoch)", n)
	}
	if deferred != direct {
		t.Errorf("deferred conversion changes the batches")
	}
}

// TestShuffleAboveMapsIsExact: the planner's move of a shuffle above the
// maps feeding it changes nothing in the output. The same pipelines run as
// written (optimize: false) and moved give the same bytes, over two
// epochs, with parallel maps drawing random crops and flips, a shuffle
// buffer smaller and one larger than the epoch, and a chain of two maps;
// and the moved shuffle holds paths instead of images.
func TestShuffleAboveMapsIsExact(t *testing.T) {
	dir := t.TempDir()
	for i := range 10 {
		writeJPEG(t, filepath.Join(dir, fmt.Sprintf("img%02d.jpg", i)), 40+7*i, 30+5*i, int64(i))
	}
	for _, tc := range []struct{ name, maps string }{
		{"one map, buffer 6", `
  - name: decode
    type: map
    parallelism: 2
    set:
      image: 'decode_image(read_file(path), 3) | random_resized_crop(16, 16) | flip_left_right(0.5) | to_float()'
      label: 'len(path)'
  - {name: shuffle, type: shuffle, buffer: 6}
  - {name: batch, type: batch, size: 4}`},
		{"two maps, buffer 32", `
  - {name: label, type: map, parallelism: 2, set: {label: 'len(path) % 3'}}
  - name: decode
    type: map
    parallelism: 2
    set:
      image: 'decode_image(read_file(path), 3) | random_crop(24, 24) | flip_left_right(0.5)'
    keep: [image, path, label]
  - {name: shuffle, type: shuffle, buffer: 32}`},
		{"decode, then a map that keeps the size", `
  - {name: decode, type: map, parallelism: 2, set: {image: 'decode_image(read_file(path), 3) | random_resized_crop(48, 48) | flip_left_right(0.5)'}}
  - {name: norm, type: map, set: {image: 'normalize(to_float(image), [0.485, 0.456, 0.406], [0.229, 0.224, 0.225])'}, keep: [image]}
  - {name: shuffle, type: shuffle, buffer: 6}
  - {name: batch, type: batch, size: 3}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := func(optimize string) (string, *engine.Report) {
				spec := `
version: 1
name: moved
seed: 11
epochs: 2
optimize: ` + optimize + `
stages:
  - {name: files, type: files, pattern: '*.jpg', shuffle: true}` + tc.maps + `
  - {name: out, type: write_jsonl, path: out-` + optimize + `.jsonl}
`
				rep, err := runSpec(t, dir, spec)
				if err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(filepath.Join(dir, "out-"+optimize+".jsonl"))
				if err != nil {
					t.Fatal(err)
				}
				return string(b), rep
			}
			asWritten, rw := run("false")
			moved, rm := run("true")
			if len(rw.Rewrites) != 0 || len(rm.Rewrites) != 1 || rm.Rewrites[0].Stage != "shuffle" || !rm.Rewrites[0].SameOrder {
				t.Fatalf("rewrites %v as written, %v moved; want none, then the shuffle", rw.Rewrites, rm.Rewrites)
			}
			if n := strings.Count(asWritten, "\n"); n < 6 {
				t.Fatalf("%d lines of output", n)
			}
			if moved != asWritten {
				t.Errorf("moving the shuffle changed the output")
			}
			// Paths of about 60 bytes against images of at least 16×16×3.
			if w, m := rw.Stages["shuffle"].Bytes, rm.Stages["shuffle"].Bytes; m <= 0 || m*3 > w {
				t.Errorf("shuffle passed %d bytes as written, %d moved; want under a third", w, m)
			}
		})
	}
}

// TestRawImagesRoundTrip: decoded images written by write_tfrecord (a
// uint8 tensor is one raw bytes value, as tf.io.serialize_tensor's
// cheaper cousin tobytes() gives) read back through parse_example and
// decode_raw into the very tensors that were written, as
// tf.io.decode_raw reads them; a shape that does not fit the bytes fails
// naming the record's sample.
func TestRawImagesRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for i := range 5 {
		writeJPEG(t, filepath.Join(dir, fmt.Sprintf("p%d.jpg", i)), 40+7*i, 30+5*i, int64(i))
	}
	const decode = `
version: 1
name: write
stages:
  - {name: files, type: files, pattern: "*.jpg"}
  - {name: decode, type: map, set: {image: 'decode_image(read_file(path), 3) | resize(6, 5)'}}
  - {name: tf, type: write_tfrecord, input: decode, path: raw.tfrecord}
  - {name: js, type: write_jsonl, input: decode, path: want.jsonl}
`
	if _, err := runSpec(t, dir, decode); err != nil {
		t.Fatal(err)
	}
	const read = `
version: 1
name: read
stages:
  - {name: records, type: tfrecord, input: files}
  - {name: files, type: files, pattern: raw.tfrecord}
  - name: parse
    type: parse_example
    input: records
    features:
      path: {dtype: string, shape: []}
      image: {dtype: bytes, shape: []}
  - {name: raw, type: map, set: {image: 'decode_raw(image, "uint8", [%s])'}}
  - {name: out, type: write_jsonl, path: got.jsonl}
`
	if _, err := runSpec(t, dir, fmt.Sprintf(read, "-1, 5, 3")); err != nil {
		t.Fatal(err)
	}
	want, got := readLines(t, filepath.Join(dir, "want.jsonl")), readLines(t, filepath.Join(dir, "got.jsonl"))
	if len(want) != 5 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("read back:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var first struct{ Image [][][]int }
	if err := json.Unmarshal([]byte(want[0]), &first); err != nil || len(first.Image) != 6 || len(first.Image[0]) != 5 || len(first.Image[0][0]) != 3 {
		t.Errorf("written image is not 6×5×3: %v %s", err, want[0])
	}
	_, err := runSpec(t, dir, fmt.Sprintf(read, "7, 5, 3"))
	if err == nil || !strings.Contains(err.Error(), `stage "raw"`) || !strings.Contains(err.Error(), "decode_raw: shape [7 5 3] holds 105 uint8 elements (105 bytes), got 90 bytes") {
		t.Errorf("a shape that does not fit: %v", err)
	}
}

// TestMixedChannelsBatchSaysWhy: PNGs decoded as stored (channels 0) with
// different channel counts cannot be batched, and both validate (warning)
// and the run (error) say it is the channels and how to fix them, not
// "resize first or add pad", which would put alpha in the green channel.
func TestMixedChannelsBatchSaysWhy(t *testing.T) {
	data := tfrSharedData(t)
	dir := t.TempDir()
	src := fmt.Sprintf(`
version: 1
name: mixed
stages:
  - {name: files, type: files, patterns: [%q, %q]}
  - {name: decode, type: map, set: {img: 'decode_image(read_file(path), 0) | resize(16, 16)'}, keep: [img]}
  - {name: b, type: batch, size: 2}
  - {name: out, type: discard}
`, filepath.Join(data, "png-edge", "pngsuite", "basn4a08.png"), filepath.Join(data, "png-edge", "pngsuite", "basn6a08.png"))
	_, diags := spec.Parse(filepath.Join(dir, "spec.yaml"), []byte(src), spec.Options{Catalog: stages.Default()})
	const fix = "decode with a fixed channel count, e.g. decode_image(b, 3) or decode_image(b, 4), rather than 0 (as stored)"
	if w := fmt.Sprint(diags); diags.HasErrors() || !strings.Contains(w, `field "img" is tensor<uint8>[16 16 ?]: its last dimension is known only at run time, and batching fails if it varies between samples; for images, `+fix+`; for other data, add pad: {img: 0}`) {
		t.Errorf("validate warnings:\n%s", w)
	}
	_, err := runSpec(t, dir, src)
	if err == nil || !strings.Contains(err.Error(), `field "img": channel counts differ within a batch (`) || !strings.Contains(err.Error(), "is uint8[16 16 2]") ||
		!strings.Contains(err.Error(), "is uint8[16 16 4]") || !strings.Contains(err.Error(), fix) || strings.Contains(err.Error(), "pad") {
		t.Errorf("run: %v", err)
	}
	// Rows of 5 and 7 bytes are not images: pad them.
	for i, n := range []int{5, 7} {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("r%d.bin", i)), make([]byte, 4*8*n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err = runSpec(t, dir, `
version: 1
name: raw
stages:
  - {name: files, type: files, pattern: "r*.bin"}
  - {name: m, type: map, set: {seq: 'decode_raw(read_file(path), "uint8", [4, 8, -1])'}, keep: [seq]}
  - {name: b, type: batch, size: 2}
  - {name: out, type: discard}
`)
	if err == nil || !strings.Contains(err.Error(), `field "seq": shapes differ within a batch (`) || !strings.Contains(err.Error(), "add pad: {seq: 0}") {
		t.Errorf("rows of 5 and 7 bytes: %v", err)
	}
}

// TestSetEntriesDrawApart: two set entries of one map calling the same
// random function draw independently (two "views" of one image, as
// SimCLR takes), and an entry's draws depend on its key, not on its place,
// so adding an entry before it leaves them as they were. Each entry
// numbers its call sites from 1, and before the entry's key joined the
// seeding every pair came out identical.
func TestSetEntriesDrawApart(t *testing.T) {
	dir := t.TempDir()
	const img = `img: 'decode_raw(repeat(string(index % 10) + "abcdefghijklmnopqrstuvwxyz", 27), "uint8", [9, 27, 3])'`
	run := func(out, extra string) []map[string]any {
		src := `
version: 1
name: views
seed: 5
stages:
  - {name: src, type: range, count: 40}
  - name: aug
    type: map
    set:
      ` + img + extra + `
      view1: 'random_resized_crop(img, 4, 4)'
      view2: 'random_resized_crop(img, 4, 4)'
      flip1: 'flip_left_right(img, 0.5)[0][0][0]'
      flip2: 'flip_left_right(img, 0.5)[0][0][0]'
    drop: [img]
  - {name: out, type: write_jsonl, path: ` + out + `}
`
		if _, err := runSpec(t, dir, src); err != nil {
			t.Fatal(err)
		}
		var rows []map[string]any
		for _, l := range readLines(t, filepath.Join(dir, out)) {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatal(err)
			}
			rows = append(rows, m)
		}
		if len(rows) != 40 {
			t.Fatalf("%d rows, want 40", len(rows))
		}
		return rows
	}
	rows := run("a.jsonl", "")
	sameView, sameFlip := 0, 0
	for _, r := range rows {
		if fmt.Sprint(r["view1"]) == fmt.Sprint(r["view2"]) {
			sameView++
		}
		if r["flip1"] == r["flip2"] {
			sameFlip++
		}
	}
	// Crops of a 9×27 image: equal pairs happen by chance, rarely. Two
	// fair coins agree about half the time: 20 of 40, give or take 10.
	if sameView > 4 || sameFlip < 10 || sameFlip > 30 {
		t.Errorf("%d of 40 pairs of crops and %d of 40 pairs of flips equal; want under 5, and 10 to 30", sameView, sameFlip)
	}
	before := run("b.jsonl", "\n      first: 'random_resized_crop(img, 4, 4)'")
	for i := range rows {
		if fmt.Sprint(rows[i]["view1"]) != fmt.Sprint(before[i]["view1"]) || rows[i]["flip2"] != before[i]["flip2"] {
			t.Fatalf("sample %d: an entry added before view1 changed its draws", i)
		}
	}
}
