package stages

import (
	"bytes"
	"io"
	"testing"

	"github.com/piperun/piperun/tensor"
)

// biggestWrite records what is written to it, and the largest write.
type biggestWrite struct {
	bytes.Buffer
	most int
}

func (w *biggestWrite) Write(p []byte) (int, error) {
	w.most = max(w.most, len(p))
	return w.Buffer.Write(p)
}

// TestJSONLineIsWrittenInChunks: write_jsonl hands a line to the file in
// pieces of about jsonChunk bytes, never holding it whole, and the pieces
// make the line AppendJSON builds. A batch of 128 float32 images, written
// as one 204 MiB line built whole, made the process hold about 6 times
// the batch beyond its memory budget (a budget test).
func TestJSONLineIsWrittenInChunks(t *testing.T) {
	img := tensor.New(tensor.Float32, 64, 64, 3)
	for i := range img.Len() {
		img.Set(i, float64(i)/7)
	}
	raw := make([]byte, 1<<20+1) // base64 in steps, the last one padded
	for i := range raw {
		raw[i] = byte(i * 31)
	}
	fields := map[string]any{"image": img, "raw": raw, "label": int64(3), "names": []string{"a", "b"}}
	checkChunks(t, fields, jsonChunk+4*base64Step/3)
}

// checkChunks writes fields through write_jsonl's jsonOut and checks that
// no write, nor what is left for the last, is over most bytes, and that
// the pieces make the line AppendJSON builds whole.
func checkChunks(t *testing.T, fields map[string]any, most int) {
	t.Helper()
	whole, err := AppendJSON(nil, fields)
	if err != nil {
		t.Fatal(err)
	}
	var w biggestWrite
	o := jsonOut{w: &w}
	if err := o.object(fields); err != nil {
		t.Fatal(err)
	}
	if w.most == 0 || w.most > most || len(o.b) > most {
		t.Errorf("largest write %d bytes, %d left over; want some, none over %d", w.most, len(o.b), most)
	}
	w.Write(o.b)
	if !bytes.Equal(w.Bytes(), whole) {
		t.Errorf("the chunks make %d bytes, not the %d of the whole line", w.Len(), len(whole))
	}
}

// BenchmarkJSONLine writes one 224×224×3 float32 image as a JSON line:
// built whole (AppendJSON) and in chunks to a writer (write_jsonl).
func BenchmarkJSONLine(b *testing.B) {
	img := tensor.New(tensor.Float32, 224, 224, 3)
	for i := range img.Len() {
		img.Set(i, float64(i%255)/255)
	}
	fields := map[string]any{"image": img, "label": int64(1)}
	b.Run("whole", func(b *testing.B) {
		b.SetBytes(int64(img.Bytes()))
		var buf []byte
		for b.Loop() {
			var err error
			if buf, err = AppendJSON(buf[:0], fields); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("chunks", func(b *testing.B) {
		b.SetBytes(int64(img.Bytes()))
		o := jsonOut{w: io.Discard}
		for b.Loop() {
			o.b = o.b[:0]
			if err := o.object(fields); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestJSONRowsOfEveryDType: rows of each dtype are written as the
// element-by-element path writes them.
func TestJSONRowsOfEveryDType(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.Uint8, tensor.Int32, tensor.Int64, tensor.Float32, tensor.Float64} {
		x := tensor.New(dt, 2, 3)
		for i := range x.Len() {
			x.Set(i, float64(i)*1.5)
		}
		got, err := AppendJSON(nil, map[string]any{"x": x})
		if err != nil {
			t.Fatal(err)
		}
		want := `{"x":[[0,1,3],[4,6,7]]}`
		if dt.IsFloat() {
			want = `{"x":[[0.0,1.5,3.0],[4.5,6.0,7.5]]}`
		}
		if string(got) != want {
			t.Errorf("%s: %s, want %s", dt, got, want)
		}
	}
	empty := tensor.New(tensor.Float32, 2, 0)
	if got, err := AppendJSON(nil, map[string]any{"x": empty}); err != nil || string(got) != `{"x":[[],[]]}` {
		t.Errorf("a 2×0 tensor: %s, %v", got, err)
	}
}

// TestJSONLongRowIsWrittenInChunks: a 1-D tensor (a parse_example list of
// four million floats) is one row, and its line too is written out in
// pieces: it was formatted whole before the first write (70 MB
// for 32 MB of float64s), and write_jsonl kept that buffer for the run.
func TestJSONLongRowIsWrittenInChunks(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.Uint8, tensor.Int32, tensor.Int64, tensor.Float32, tensor.Float64} {
		t.Run(dt.String(), func(t *testing.T) {
			x := tensor.New(dt, 1<<20)
			for i := range x.Len() {
				x.Set(i, float64(i%251)-100.125)
			}
			// 24 bytes: the longest element text, a float64's with its comma.
			checkChunks(t, map[string]any{"x": x}, jsonChunk+jsonRowStep*24)
		})
	}
}
