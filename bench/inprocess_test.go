package bench

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/piperun/piperun/imageops"
)

// BenchmarkDecodeResizeFloatInProcess runs W1's per-image work (decode,
// resize to 224×224, to_float) as a bare loop in 1 and 2 goroutines of one
// process, taking photos from a shared counter: what W1 could reach with
// no pipeline at all, on as many decoders as W1 has. Set against two
// processes of 1 goroutine each, it shows what two cgo decoders in one Go
// process cost (bench/RESULTS.md, run P).
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
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "images/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
