package example

import (
	"bytes"
	"io"
	"testing"

	"github.com/piperun/piperun/tfrecord"
)

// imageExample is shaped like an image-classification record: a 150 KB
// encoded image, a label, and a few box coordinates and sizes.
func imageExample(i int) *Example {
	img := make([]byte, 150_000)
	for j := range img {
		img[j] = byte(j*131 + i)
	}
	return &Example{Features: map[string]*Feature{
		"image/encoded":          {Kind: KindBytes, Bytes: [][]byte{img}},
		"image/format":           {Kind: KindBytes, Bytes: [][]byte{[]byte("jpeg")}},
		"image/class/label":      {Kind: KindInt64, Ints: []int64{int64(i % 1000)}},
		"image/height":           {Kind: KindInt64, Ints: []int64{375}},
		"image/width":            {Kind: KindInt64, Ints: []int64{500}},
		"image/object/bbox/xmin": {Kind: KindFloat, Floats: []float32{0.1, 0.2}},
		"image/object/bbox/ymin": {Kind: KindFloat, Floats: []float32{0.15, 0.25}},
		"image/object/bbox/xmax": {Kind: KindFloat, Floats: []float32{0.8, 0.9}},
		"image/object/bbox/ymax": {Kind: KindFloat, Floats: []float32{0.85, 0.95}},
	}}
}

func imageStream(b *testing.B, n int) []byte {
	var buf bytes.Buffer
	w := tfrecord.NewWriter(&buf, tfrecord.None)
	for i := range n {
		if err := w.Write(Marshal(imageExample(i))); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkReadParse measures the pipeline's front end: TFRecord framing,
// CRC checks and Example parsing of an in-memory stream.
func BenchmarkReadParse(b *testing.B) {
	stream := imageStream(b, 64)
	want := map[string]int{"image/encoded": 0, "image/class/label": 1}
	for _, mode := range []string{"Unmarshal", "ParseInto"} {
		b.Run(mode, func(b *testing.B) {
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			for b.Loop() {
				r, err := tfrecord.NewReader(bytes.NewReader(stream), tfrecord.None, "bench")
				if err != nil {
					b.Fatal(err)
				}
				for {
					rec, err := r.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					if mode == "Unmarshal" {
						ex, err := Unmarshal(rec)
						if err != nil || len(ex.Features["image/encoded"].Bytes[0]) != 150_000 {
							b.Fatal(err)
						}
						continue
					}
					n := 0
					err = ParseInto(rec, want, func(int, *Feature) error { n++; return nil })
					if err != nil || n != 2 {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// benchParse compares Unmarshal with ParseInto on records already in memory,
// where the parse itself is all that is measured.
func benchParse(b *testing.B, rec []byte, want map[string]int) {
	b.Run("Unmarshal", func(b *testing.B) {
		b.SetBytes(int64(len(rec)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Unmarshal(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ParseInto", func(b *testing.B) {
		b.SetBytes(int64(len(rec)))
		b.ReportAllocs()
		for b.Loop() {
			if err := ParseInto(rec, want, func(int, *Feature) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkParseImage(b *testing.B) {
	benchParse(b, Marshal(imageExample(1)), map[string]int{"image/encoded": 0, "image/class/label": 1})
}

// BenchmarkParseTabular uses a record shaped like the TFX Chicago taxi data:
// 18 scalar features, of which a model typically keeps a handful.
func BenchmarkParseTabular(b *testing.B) {
	ex := &Example{Features: map[string]*Feature{}}
	for _, k := range []string{"trip_start_timestamp", "trip_start_month", "trip_start_day", "trip_start_hour",
		"pickup_community_area", "dropoff_community_area", "trip_seconds", "pickup_census_tract", "dropoff_census_tract"} {
		ex.Features[k] = &Feature{Kind: KindInt64, Ints: []int64{1432075500}}
	}
	for _, k := range []string{"fare", "tips", "trip_miles", "pickup_latitude", "pickup_longitude", "dropoff_latitude", "dropoff_longitude"} {
		ex.Features[k] = &Feature{Kind: KindFloat, Floats: []float32{41.9}}
	}
	ex.Features["payment_type"] = &Feature{Kind: KindBytes, Bytes: [][]byte{[]byte("Credit Card")}}
	ex.Features["company"] = &Feature{Kind: KindBytes, Bytes: [][]byte{[]byte("Taxi Affiliation Services")}}
	benchParse(b, Marshal(ex), map[string]int{"fare": 0, "tips": 1, "trip_miles": 2, "payment_type": 3})
}
