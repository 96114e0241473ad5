package cache

import (
	"context"
	"runtime"
	"runtime/metrics"
	"testing"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/tensor"
)

// benchSample is a 150 KB sample: a 224×224×3 uint8 image plus a label.
func benchSample(id int64) *sample.Sample {
	img := tensor.New(tensor.Uint8, 224, 224, 3)
	for i := range img.Data {
		img.Data[i] = byte(i + int(id))
	}
	return &sample.Sample{ID: id, Fields: map[string]any{"image": img, "label": id % 1000}}
}

func BenchmarkWrite(b *testing.B) {
	c, err := Open(b.TempDir(), "bench", Manifest{}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s := benchSample(0)
	b.SetBytes(int64(len(Encode(nil, s))))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.ID = int64(i)
		if err := c.Put(int64(i), s); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 {
			if err := c.Commit(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := c.Commit(); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkRead(b *testing.B) {
	const n = 2000 // 300 MB
	c, err := Open(b.TempDir(), "bench", Manifest{}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s := benchSample(0)
	size := int64(len(Encode(nil, s)))
	for i := int64(0); i < n; i++ {
		s.ID = i
		if err := c.Put(i, s); err != nil {
			b.Fatal(err)
		}
	}
	if err := c.MarkComplete(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for read := 0; read < b.N; {
		err := c.Iterate(context.Background(), func(s *sample.Sample) error {
			read++
			if read >= b.N {
				return errStop
			}
			return nil
		})
		if err != nil && err != errStop {
			b.Fatal(err)
		}
	}
}

type stopError struct{}

func (stopError) Error() string { return "stop" }

var errStop error = stopError{}

// liveHeap returns the heap found live by the last garbage collection, the
// memory a budget must cover (HeapInuse would also count garbage awaiting
// collection).
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// BenchmarkWriteMemory writes about 300 MB of samples and reports the peak
// live Go heap seen after each commit next to Options.MemoryBytes, as a check of
// that bound (not an assertion: the heap depends on GC timing). Large
// samples go to the value log; small ones (under ValueThreshold) fill
// memtables and drive compactions, the worst case for Badger's memory.
func BenchmarkWriteMemory(b *testing.B) {
	small := func(id int64) *sample.Sample {
		return &sample.Sample{ID: id, Fields: map[string]any{"x": make([]byte, 600), "label": id}}
	}
	for _, bc := range []struct {
		name string
		n    int64
		mk   func(int64) *sample.Sample
	}{{"150KB", 2000, benchSample}, {"600B", 500000, small}} {
		b.Run(bc.name, func(b *testing.B) {
			opts := Options{}
			for i := 0; i < b.N; i++ {
				c, err := Open(b.TempDir(), "bench", Manifest{}, opts)
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				base, peak := liveHeap(), uint64(0)
				s := bc.mk(0)
				for id := int64(0); id < bc.n; id++ {
					s.ID = id
					if err := c.Put(id, s); err != nil {
						b.Fatal(err)
					}
					if id%(bc.n/20) == bc.n/20-1 {
						if err := c.Commit(); err != nil {
							b.Fatal(err)
						}
						peak = max(peak, liveHeap())
					}
				}
				c.Close()
				b.ReportMetric(float64(peak-base)/(1<<20), "peak-heap-MiB")
				b.ReportMetric(float64(opts.MemoryBytes())/(1<<20), "bound-MiB")
			}
		})
	}
}
