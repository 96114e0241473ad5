package stages

import (
	"bytes"
	"context"
	"testing"
	"unsafe"

	"github.com/piperun/piperun/example"
	"github.com/piperun/piperun/sample"
)

// within reports whether b's bytes lie inside rec's backing array.
func within(b, rec []byte) bool {
	if len(b) == 0 {
		return false
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(rec)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= start && p < start+uintptr(len(rec))
}

// TestParsedBytesHoldNoRecordAlive: bytes features that are a small part
// of their record are copied out of it. Aliased, a 20-byte file name kept
// its 380 KB record alive while the budget counted 20 bytes (a memory
// audit saw 680 MiB of RSS under a 64 MiB budget behind a shuffle of
// them). A feature that is most of the record by itself (the encoded
// image) stays an alias: copying it would save nothing.
func TestParsedBytesHoldNoRecordAlive(t *testing.T) {
	image := bytes.Repeat([]byte{0xab}, 100_000)
	rec := example.Marshal(&example.Example{Features: map[string]*example.Feature{
		"image": {Kind: example.KindBytes, Bytes: [][]byte{image}},
		"name":  {Kind: example.KindBytes, Bytes: [][]byte{[]byte("n01440764_10026.JPEG")}},
		"tags":  {Kind: example.KindBytes, Bytes: [][]byte{[]byte("a"), []byte("bc")}},
	}})
	for _, tc := range []struct {
		keys    []string
		shapes  [][]int
		aliased string // the key left an alias, if any
	}{
		{[]string{"name"}, [][]int{nil}, ""},
		{[]string{"tags"}, [][]int{{-1}}, ""},
		{[]string{"name", "tags"}, [][]int{nil, {2}}, ""},
		{[]string{"image"}, [][]int{nil}, "image"},
		// The usual parse: the image is decoded and dropped by the map
		// below, and the name stays; decided for the record as a whole,
		// the name stayed an alias too (a review).
		{[]string{"image", "name"}, [][]int{nil, nil}, "image"},
	} {
		p := &parseExample{field: "record", want: map[string]int{}}
		for i, k := range tc.keys {
			p.keys = append(p.keys, k)
			p.specs = append(p.specs, FeatureSpec{DType: "bytes", Shape: tc.shapes[i]})
			p.defaults = append(p.defaults, nil)
			p.want[k] = i
		}
		var out *sample.Sample
		in := &sample.Sample{Fields: map[string]any{"record": rec}}
		if err := p.Process(context.Background(), in, func(s *sample.Sample) error { out = s; return nil }); err != nil {
			t.Fatal(err)
		}
		for _, k := range tc.keys {
			var parts [][]byte
			switch v := out.Fields[k].(type) {
			case []byte:
				parts = [][]byte{v}
			case [][]byte:
				parts = v
			default:
				t.Fatalf("%v: %s is %T", tc.keys, k, v)
			}
			for _, b := range parts {
				if got, want := within(b, rec), k == tc.aliased; got != want {
					t.Errorf("parsing %v: %s aliases the record: %v, want %v", tc.keys, k, got, want)
				}
			}
		}
		if got := out.Fields[tc.keys[0]]; tc.keys[0] == "name" && string(got.([]byte)) != "n01440764_10026.JPEG" {
			t.Errorf("name = %q", got)
		}
	}
}
