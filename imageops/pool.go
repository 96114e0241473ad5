package imageops

import (
	"math/bits"
	"sync"

	"github.com/piperun/piperun/tensor"
)

// Pool recycles byte buffers bucketed by power-of-two capacity, so that the
// intermediate buffers of decode and resize (a full-size decoded frame, a
// half-resized plane) are reused across samples instead of being garbage
// collected at hundreds of megabytes per second.
//
// Buffers from Get have unspecified contents. A buffer handed to Put must not
// be used afterwards. The zero Pool is ready to use and safe for concurrent
// use.
type Pool struct {
	buckets [poolMaxShift + 1]sync.Pool
}

const (
	poolMinShift = 12 // below 4 KiB the allocator is cheaper than the pool
	poolMaxShift = 28 // above 256 MiB a buffer is too big to keep around
)

// defaultPool serves the package's own intermediate buffers.
var defaultPool Pool

// Get returns a buffer of length n whose capacity is n rounded up to a
// power of two.
func (p *Pool) Get(n int) []byte {
	if n <= 0 {
		return nil
	}
	shift := bits.Len(uint(n - 1))
	if shift < poolMinShift {
		shift = poolMinShift
	}
	if shift > poolMaxShift {
		return make([]byte, n)
	}
	if v := p.buckets[shift].Get(); v != nil {
		b := *(v.(*[]byte))
		return b[:n]
	}
	b := make([]byte, n, 1<<shift)
	if shift >= hugeShift {
		tensor.AdviseHuge(b[:cap(b)])
	}
	return b
}

// hugeShift is the smallest bucket whose fresh buffers are put on
// transparent huge pages: a decoded frame or a half-resized plane is
// hundreds of kilobytes, first touched page by page, and each 4 KiB page
// fault is costly in a virtual machine (see tensor.AdviseHuge). Smaller
// scratch is left alone: the advice covers the whole 2 MiB block around a
// buffer, and one madvise call per small buffer would cost more than it
// saves.
const hugeShift = 18

// Put gives b back for reuse. Buffers whose capacity is not a power of two
// in the pooled range did not come from Get and are left to the GC.
func (p *Pool) Put(b []byte) {
	c := cap(b)
	if c == 0 || c&(c-1) != 0 {
		return
	}
	shift := bits.Len(uint(c)) - 1
	if shift < poolMinShift || shift > poolMaxShift {
		return
	}
	b = b[:c]
	p.buckets[shift].Put(&b)
}

// getF32 returns a pooled float32 scratch slice of length n together with the
// byte buffer backing it, which the caller hands back with Put.
func (p *Pool) getF32(n int) ([]float32, []byte) {
	b := p.Get(4 * n)
	return bytesAsF32(b), b
}

// getI32 is getF32 for int32 accumulators.
func (p *Pool) getI32(n int) ([]int32, []byte) {
	b := p.Get(4 * n)
	return bytesAsI32(b), b
}

// getU64 is getF32 for uint64 scratch.
func (p *Pool) getU64(n int) ([]uint64, []byte) {
	b := p.Get(8 * n)
	return bytesAsU64(b), b
}
