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
// them). A feature that is most of the record (the encoded image) stays
// an alias: copying it would save nothing.
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
		aliased bool
	}{
		{[]string{"name"}, [][]int{nil}, false},
		{[]string{"tags"}, [][]int{{-1}}, false},
		{[]string{"name", "tags"}, [][]int{nil, {2}}, false},
		{[]string{"image"}, [][]int{nil}, true},
		{[]string{"image", "name"}, [][]int{nil, nil}, true},
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
				if got := within(b, rec); got != tc.aliased {
					t.Errorf("parsing %v: %s aliases the record: %v, want %v", tc.keys, k, got, tc.aliased)
				}
			}
		}
		if got := out.Fields[tc.keys[0]]; tc.keys[0] == "name" && string(got.([]byte)) != "n01440764_10026.JPEG" {
			t.Errorf("name = %q", got)
		}
	}
}
