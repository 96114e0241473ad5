package tfrecord

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func FuzzReader(f *testing.F) {
	for _, s := range beamStreams {
		b := beamBytes(f, s.hex, s.b64)
		f.Add(b, uint8(None))
		f.Add(compress(f, Gzip, b), uint8(Gzip))
		f.Add(compress(f, Zlib, b), uint8(Zlib))
		bad := bytes.Clone(b)
		bad[9]++
		f.Add(bad, uint8(None))
	}
	f.Add([]byte{}, uint8(None))
	f.Add(writeAll(f, None, [][]byte{{}, []byte("x"), bytes.Repeat([]byte{0xab}, 300)}), uint8(None))
	// Small real files, when the shared data is present.
	{
		dir := os.Getenv("PIPERUN_SHARED_DATA")
		if dir == "" {
			dir = filepath.Join("..", "..", "shared", "data")
		}
		for _, name := range []string{"ranking/train_elwc.tfrecord", "tfx/penguin_Split-train_data_tfrecord-00000-of-00001.gz"} {
			b, err := os.ReadFile(filepath.Join(dir, "tfrecord", name))
			if err != nil {
				continue
			}
			f.Add(b, uint8(Detect(name, b)))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, comp uint8) {
		c := Compression(comp % 3)
		r, err := NewReader(bytes.NewReader(data), c, "fuzz")
		if err != nil {
			return
		}
		// Keep hostile lengths from allocating much.
		r.SetMaxRecordSize(1 << 20)
		var recs [][]byte
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				var ce *CorruptError
				if !errors.As(err, &ce) {
					t.Fatalf("non-corrupt error from in-memory input: %v", err)
				}
				if ce.Record != len(recs) {
					t.Fatalf("error names record %d after %d records", ce.Record, len(recs))
				}
				if again, _ := r.Next(); again != nil {
					t.Fatal("a record after an error")
				}
				break
			}
			recs = append(recs, rec)
		}
		// Compressors are costly to set up, so only re-compress when the
		// input was compressed.
		rewrite := []Compression{None}
		if c != None {
			rewrite = append(rewrite, c)
		}
		for _, cc := range rewrite {
			b := writeAll(t, cc, recs)
			r2, err := NewReader(bytes.NewReader(b), cc, "rewrite")
			if err != nil {
				t.Fatal(err)
			}
			got, err := readAll(t, r2)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(recs) {
				t.Fatalf("re-read %d records, want %d", len(got), len(recs))
			}
			for i := range got {
				if !bytes.Equal(got[i], recs[i]) {
					t.Fatalf("record %d differs after rewrite", i)
				}
			}
		}
		if c == None && len(recs) > 0 {
			// Uncompressed framing is canonical: the consumed prefix is
			// reproduced byte for byte.
			if b := writeAll(t, None, recs); !bytes.Equal(b, data[:len(b)]) {
				t.Fatal("rewritten stream differs from the input prefix")
			}
		}
	})
}
