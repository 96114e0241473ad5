package tfrecord

import (
	"bytes"
	"io"
	"testing"
)

// benchRecords returns n records of about 150 KB, the size of a typical
// JPEG in an image-classification dataset.
func benchRecords(n int) [][]byte {
	recs := make([][]byte, n)
	for i := range recs {
		rec := make([]byte, 150_000+i)
		for j := range rec {
			rec[j] = byte(j*31 + i)
		}
		recs[i] = rec
	}
	return recs
}

func BenchmarkRead(b *testing.B) {
	stream := writeAll(b, None, benchRecords(64))
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := NewReader(bytes.NewReader(stream), None, "bench")
		if err != nil {
			b.Fatal(err)
		}
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkWrite(b *testing.B) {
	recs := benchRecords(64)
	var total int64
	for _, r := range recs {
		total += int64(len(r)) + 16
	}
	var buf bytes.Buffer
	buf.Grow(int(total))
	b.SetBytes(total)
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		w := NewWriter(&buf, None)
		for _, r := range recs {
			if err := w.Write(r); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
