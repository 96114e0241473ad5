package tfrecord

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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

// adversarialResync returns a stream of size bytes that a resynchronising
// reader finds costly: a bad first header, then a header every 12 bytes
// whose length passes its check and claims the rest of the stream, or most
// bytes when fewer, so that every one of them fits and fails only its data
// check.
func adversarialResync(size, most int) []byte {
	b := make([]byte, size)
	for i := range headerSize {
		b[i] = 0xee
	}
	for p := headerSize; p+headerSize <= size; p += headerSize {
		binary.LittleEndian.PutUint64(b[p:], uint64(min(size-p-headerSize-footerSize, most)))
		putCRC(b[p:])
	}
	return b
}

// BenchmarkResyncAdversarial reads adversarialResync's stream with resync
// on: without a bound on the scan's checks its cost grows with the square
// of the size.
func BenchmarkResyncAdversarial(b *testing.B) {
	for _, size := range []int{256 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			stream := adversarialResync(size, size)
			b.SetBytes(int64(size))
			for b.Loop() {
				r, err := NewReader(bytes.NewReader(stream), None, "bench")
				if err != nil {
					b.Fatal(err)
				}
				r.SetResync(true)
				readToEnd(b, r)
			}
		})
	}
}

// BenchmarkResyncEveryOther reads 20,000 records of 100 bytes, every other
// one with a bad header, with resync on: the cost of many short scans.
func BenchmarkResyncEveryOther(b *testing.B) {
	const n, size = 20_000, 100
	recs := make([][]byte, n)
	for i := range recs {
		recs[i] = bytes.Repeat([]byte{byte(i)}, size)
	}
	stream := writeAll(b, None, recs)
	for i := 0; i < n; i += 2 {
		stream[i*(size+headerSize+footerSize)+1] ^= 0x10
	}
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := NewReader(bytes.NewReader(stream), None, "bench")
		if err != nil {
			b.Fatal(err)
		}
		r.SetResync(true)
		if got := readToEnd(b, r); got != n/2 {
			b.Fatalf("read %d records, want %d", got, n/2)
		}
	}
}

// readToEnd reads r until io.EOF or an error that ends the stream, and
// returns the number of records read.
func readToEnd(b *testing.B, r *Reader) int {
	recs := 0
	for {
		_, err := r.Next()
		if err == io.EOF {
			return recs
		}
		var ce *CorruptError
		if errors.As(err, &ce) && ce.ReadsOn() {
			continue
		}
		if err != nil {
			return recs
		}
		recs++
	}
}

// BenchmarkReadFile reads a file of 150 KB records and one of 1 KB
// records, as stored and gzipped, through buffers of 64 and 256 KiB: the
// figures that chose bufferSize.
func BenchmarkReadFile(b *testing.B) {
	small := make([][]byte, 10000)
	for i := range small {
		small[i] = bytes.Repeat([]byte{byte(i), byte(i >> 8), 7}, 340)
	}
	sets := []struct {
		name string
		recs [][]byte
	}{{"150KB", benchRecords(64)}, {"1KB", small}}
	for _, set := range sets {
		for _, c := range []Compression{None, Gzip} {
			stream := writeAll(b, c, set.recs)
			path := filepath.Join(b.TempDir(), "f")
			if err := os.WriteFile(path, stream, 0o644); err != nil {
				b.Fatal(err)
			}
			for _, size := range []int{64 << 10, 256 << 10} {
				b.Run(fmt.Sprintf("%s/%s/buf=%dKiB", set.name, c, size>>10), func(b *testing.B) {
					b.SetBytes(int64(len(stream)))
					for b.Loop() {
						r, f, err := openSize(path, c, false, size)
						if err != nil {
							b.Fatal(err)
						}
						for {
							if _, err := r.Next(); err == io.EOF {
								break
							} else if err != nil {
								b.Fatal(err)
							}
						}
						f.Close()
					}
				})
			}
		}
	}
}
