package bench

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/piperun/piperun/imageops"
)

// BenchmarkDecodeResizeFloatInProcess runs W1's per-image work (decode,
// resize to 224×224, to_float) as a bare loop in 1 and 2 goroutines of one
// process, taking photos from a shared counter: what W1 could reach with
// no pipeline at all, on as many decoders as W1 has. Each goroutine
// yields after each photo, as W1's workers do after each job; without it
// two goroutines reached about 0.82 of twice one, with it 1.00
// (bench/RESULTS.md, runs P and AH).
func BenchmarkDecodeResizeFloatInProcess(b *testing.B) {
	data, _ := photos(b)
	for _, g := range []int{1, 2} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			total := int64(b.N * len(data))
			var next atomic.Int64
			var wg sync.WaitGroup
			for range g {
				wg.Go(func() {
					for i := next.Add(1) - 1; i < total; i = next.Add(1) - 1 {
						img, err := imageops.DecodeResizeFloat(data[i%int64(len(data))], 3, 224, 224, imageops.Bilinear, imageops.DecodeOptions{})
						if err != nil {
							b.Error(err)
							return
						}
						img.Recycle()
						runtime.Gosched() // as in BenchmarkDecodeResize224NoFloat
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "images/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
