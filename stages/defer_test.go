package stages_test

import (
	"testing"

	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// TestToFloatDeferredToBatch: a map's trailing to_float is left to the batch
// downstream exactly when nothing in between can see the field.
func TestToFloatDeferredToBatch(t *testing.T) {
	const decode = `'decode_image(read_file(path), 3) | resize(8, 8) | to_float()'`
	for _, tc := range []struct {
		name, stages string
		want         string // the map's output type of image
	}{
		{"shuffle then batch", `
  - {name: m, type: map, set: {image: ` + decode + `}}
  - {name: s, type: shuffle, buffer: 4}
  - {name: b, type: batch, size: 2}`, "tensor<uint8→float32>[8 8 3]"},
		{"prefetch, take, skip", `
  - {name: m, type: map, set: {image: ` + decode + `}}
  - {name: p, type: prefetch}
  - {name: t, type: take, count: 3}
  - {name: k, type: skip, count: 1}
  - {name: b, type: batch, size: 2}`, "tensor<uint8→float32>[8 8 3]"},
		{"a filter reads the field", `
  - {name: m, type: map, set: {image: ` + decode + `}}
  - {name: f, type: filter, where: 'shape(image)[0] > 0'}
  - {name: b, type: batch, size: 2}`, "tensor<float32>[8 8 3]"},
		{"a filter reads other fields", `
  - {name: m, type: map, set: {image: ` + decode + `}}
  - {name: f, type: filter, where: 'path != "" && $env["path"] != "x"'}
  - {name: b, type: batch, size: 2}`, "tensor<uint8→float32>[8 8 3]"},
		{"a filter reads $env", `
  - {name: m, type: map, set: {image: ` + decode + `}}
  - {name: f, type: filter, where: '$env[path] != nil'}
  - {name: b, type: batch, size: 2}`, "tensor<float32>[8 8 3]"},
		{"a cache", `
  - {name: m, type: map, set: {image: ` + decode + `}}
  - {name: c, type: cache}
  - {name: b, type: batch, size: 2}`, "tensor<float32>[8 8 3]"},
		{"batch pads the field", `
  - {name: m, type: map, set: {image: ` + decode + `}}
  - {name: b, type: batch, size: 2, pad: {image: 0}}`, "tensor<float32>[8 8 3]"},
		{"no batch", `
  - {name: m, type: map, set: {image: ` + decode + `}}
  - {name: s, type: shuffle, buffer: 4}`, "tensor<float32>[8 8 3]"},
		{"a later expression reads it", `
  - {name: m, type: map, set: {image: ` + decode + `, hw: 'shape(image)'}}
  - {name: b, type: batch, size: 2}`, "tensor<float32>[8 8 3]"},
		{"fan-out", `
  - {name: m, type: map, set: {image: ` + decode + `}}
  - {name: w, type: write_jsonl, inputs: [m], path: out.jsonl}
  - {name: b, type: batch, size: 2, input: m}`, "tensor<float32>[8 8 3]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "version: 1\nname: d\nstages:\n  - {name: files, type: files, pattern: '*.jpg'}" + tc.stages + "\n  - {name: out, type: discard}\n"
			sp, diags := spec.Parse("d.yaml", []byte(src), spec.Options{Catalog: stages.Default()})
			if diags.HasErrors() {
				t.Fatalf("%v", diags)
			}
			st := sp.Stage("m")
			typ, _ := st.Schema.Lookup("image")
			if typ.String() != tc.want {
				t.Errorf("map emits image as %s, want %s", typ, tc.want)
			}
			// Whatever travels, the batch gives float32.
			if b := sp.Stage("b"); b != nil {
				if bt, _ := b.Schema.Lookup("image"); bt.String() != "tensor<float32>[? 8 8 3]" {
					t.Errorf("batch emits image as %s", bt)
				}
			}
		})
	}
}
