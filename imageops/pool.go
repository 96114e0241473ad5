package imageops

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/piperun/piperun/tensor"
)

// Pool recycles byte buffers bucketed by power-of-two capacity, so that the
// intermediate buffers of decode and resize (a full-size decoded frame, a
// half-resized plane) are reused across samples instead of being garbage
// collected at hundreds of megabytes per second.
//
// It is not a sync.Pool: that one drops everything it holds within two
// garbage collections, and a pipeline collects every few hundred
// milliseconds, so each drop sent its decoders back to fresh memory (W1
// allocated 44 MB of scratch in its first two epochs, 10–11 MB now, and
// kept allocating after). Here an idle buffer is dropped only when it has
// sat unused through a whole aging period (at most one per second, driven
// by the collector, as the tensor pool ages), or when the pools together
// already hold poolIdleLimit bytes. And a request whose bucket is empty
// takes a buffer from the next larger buckets before it allocates: photos
// of a dataset differ in size, and a frame buffer big enough for the
// largest then serves them all instead of one per bucket per decoder.
//
// Buffers from Get have unspecified contents. A buffer handed to Put must not
// be used afterwards. The zero Pool is ready to use and safe for concurrent
// use; once used, a Pool is never freed, so keep pools in package variables.
type Pool struct {
	mu sync.Mutex
	// free holds the buffers put back since the last aging, old those idle
	// through it, by bucket.
	free, old [poolMaxShift + 1][][]byte
	idle      int64 // bytes of capacity in free and old, also counted in *all
	// all counts the idle bytes of every Pool sharing the limit: idleAll,
	// unless a test gives a Pool its own.
	all   *atomic.Int64
	aged  time.Time
	armed bool
}

const (
	poolMinShift = 12 // below 4 KiB the allocator is cheaper than the pool
	poolMaxShift = 28 // above 256 MiB a buffer is too big to keep around
	// poolReach is how many buckets above its own a request may take a
	// buffer from: up to 4× the size, no more, so that a small request
	// does not hold a large buffer another one needs.
	poolReach = 2
	// poolIdleLimit bounds the idle bytes all Pools together hold; beyond
	// it, Put leaves the buffer to the collector. They live outside the
	// run's budget, in the headroom Go's memory limit leaves above it
	// (cli.MemoryHeadroom, 128 MiB), with the runtime's own.
	poolIdleLimit = 64 << 20
	// poolAgePeriod is the least time between two agings.
	poolAgePeriod = time.Second
)

// defaultPool serves the package's own intermediate buffers.
var defaultPool Pool

// idleAll is the idle bytes of every Pool, which poolIdleLimit bounds.
var idleAll atomic.Int64

// Get returns a buffer of length n whose capacity is a power of two: n
// rounded up, or up to poolReach doublings more when only a larger idle
// buffer is at hand.
func (p *Pool) Get(n int) []byte {
	if n <= 0 {
		return nil
	}
	shift := max(bits.Len(uint(n-1)), poolMinShift)
	if shift > poolMaxShift {
		return make([]byte, n)
	}
	p.mu.Lock()
	for s := shift; s <= min(shift+poolReach, poolMaxShift); s++ {
		b := p.take(&p.free[s])
		if b == nil {
			b = p.take(&p.old[s])
		}
		if b != nil {
			p.mu.Unlock()
			return b[:n]
		}
	}
	p.mu.Unlock()
	b := make([]byte, n, 1<<shift)
	if shift >= hugeShift {
		tensor.AdviseHuge(b[:cap(b)])
	}
	return b
}

// take pops the last buffer of l, if any.
func (p *Pool) take(l *[][]byte) []byte {
	k := len(*l)
	if k == 0 {
		return nil
	}
	b := (*l)[k-1]
	(*l)[k-1] = nil
	*l = (*l)[:k-1]
	p.idle -= int64(cap(b))
	p.all.Add(-int64(cap(b)))
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
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.armed {
		p.armed = true
		tensor.OnGC(p.collected)
	}
	if p.all == nil {
		p.all = &idleAll
	}
	if p.all.Add(int64(c)) > poolIdleLimit {
		p.all.Add(-int64(c))
		return
	}
	p.free[shift] = append(p.free[shift], b[:c])
	p.idle += int64(c)
}

// collected ages the pool after a garbage collection, at most once per
// poolAgePeriod: buffers idle since the previous aging are dropped.
func (p *Pool) collected() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := time.Now(); now.Sub(p.aged) >= poolAgePeriod {
		p.aged = now
		p.age()
	}
}

// age drops the buffers of the old generation and makes the current one old.
func (p *Pool) age() {
	for s := range p.old {
		for _, b := range p.old[s] {
			p.idle -= int64(cap(b))
			p.all.Add(-int64(cap(b)))
		}
		p.old[s], p.free[s] = p.free[s], nil
	}
}

// getI32 returns a pooled int32 accumulator slice of length n together with
// the byte buffer backing it, which the caller hands back with Put.
func (p *Pool) getI32(n int) ([]int32, []byte) {
	b := p.Get(4 * n)
	return bytesAsI32(b), b
}

// getU64 is getI32 for uint64 scratch.
func (p *Pool) getU64(n int) ([]uint64, []byte) {
	b := p.Get(8 * n)
	return bytesAsU64(b), b
}
