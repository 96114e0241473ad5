package bench

import (
	"syscall"
	"testing"
)

// BenchmarkFirstTouch measures what a process pays the first time it
// writes to memory it has just mapped: the kernel's page fault and zeroing
// and, in a virtual machine, the host backing the guest's page. Every
// buffer a pipeline holds (a shuffle's samples, a batch, a decoder's
// frame) costs this once per run, which a warm single-core loop over the
// same photos never pays; W1's 2-epoch runs touch about 90 MiB so. Each
// iteration maps a fresh 64 MiB region and keeps it until the end, so the
// kernel cannot hand the same pages back. "huge" asks for transparent huge
// pages as the tensor pool does (tensor.AdviseHuge); "4k" forbids them.
func BenchmarkFirstTouch(b *testing.B) {
	const size = 64 << 20
	for _, bc := range []struct {
		name   string
		advice int
	}{{"huge", syscall.MADV_HUGEPAGE}, {"4k", syscall.MADV_NOHUGEPAGE}} {
		b.Run(bc.name, func(b *testing.B) {
			var maps [][]byte
			defer func() {
				for _, m := range maps {
					_ = syscall.Munmap(m)
				}
			}()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				m, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
				if err != nil {
					b.Fatal(err)
				}
				maps = append(maps, m)
				if err := syscall.Madvise(m, bc.advice); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				for j := 0; j < size; j += 4096 {
					m[j] = 1
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()*1e3/(float64(b.N)*size/(1<<20)), "ms/MiB")
			b.ReportMetric(0, "ns/op")
		})
	}
}
