package engine_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
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
		if !strings.Contains(c, "imageops: ") {
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
