package tensor

import "sync"

// Buffers of the tensors a pipeline makes per sample (a decoded 224×224
// image, its float32 copy, a stacked batch) are large and short-lived.
// Left to the garbage collector, every one is fresh memory: the heap grows
// to twice what is live, each new page costs a kernel page fault and each
// reused one a memclr, and the collector stops the workers to mark. The
// pool below hands the same few buffers round instead.
//
// Ownership is what makes recycling safe. Only tensors from Alloc are
// recyclable, and only until Share is called on them: anything that makes
// a second reference to a tensor (Sample.Clone, a view of its buffer, an
// expression that stores it twice) must call Share first. Recycle is called
// only by the last holder (batch, after stacking its inputs; the sinks,
// after writing), so a buffer goes back to the pool when nothing else can
// read it.

const (
	// poolMinBytes is the smallest buffer worth pooling: below it the
	// allocator is as cheap as the pool's lock.
	poolMinBytes = 32 << 10
	// DefaultPoolLimit bounds the bytes of idle buffers the pool keeps.
	DefaultPoolLimit = 64 << 20
)

type pool struct {
	mu    sync.Mutex
	limit int64
	idle  int64
	free  map[int][][]byte // by exact byte length
}

var buffers = pool{limit: DefaultPoolLimit, free: map[int][][]byte{}}

// SetPoolLimit sets how many bytes of idle buffers the recycling pool may
// keep (0 disables it) and returns the previous limit. Buffers beyond the
// limit are left to the garbage collector.
func SetPoolLimit(n int64) int64 {
	buffers.mu.Lock()
	defer buffers.mu.Unlock()
	old := buffers.limit
	buffers.limit = n
	buffers.evict(0, 0)
	return old
}

// PoolIdle returns the bytes of idle buffers the pool holds.
func PoolIdle() int64 {
	buffers.mu.Lock()
	defer buffers.mu.Unlock()
	return buffers.idle
}

func (p *pool) get(n int) []byte {
	if n >= poolMinBytes {
		p.mu.Lock()
		if l := p.free[n]; len(l) > 0 {
			b := l[len(l)-1]
			l[len(l)-1] = nil
			p.free[n] = l[:len(l)-1]
			p.idle -= int64(n)
			p.mu.Unlock()
			return b
		}
		p.mu.Unlock()
		b := make([]byte, n)
		adviseHuge(b)
		return b
	}
	return make([]byte, n)
}

func (p *pool) put(b []byte) {
	n := len(b)
	if n < poolMinBytes || cap(b) != n {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idle+int64(n) > p.limit {
		p.evict(int64(n), n)
		if p.idle+int64(n) > p.limit {
			return
		}
	}
	p.free[n] = append(p.free[n], b)
	p.idle += int64(n)
}

// evict drops buffers of sizes other than keep until need more bytes fit
// under the limit. A size no longer asked for (the last, short batch of an
// epoch; images of a stage that finished) should not hold the pool's room.
func (p *pool) evict(need int64, keep int) {
	for size, l := range p.free {
		if p.idle+need <= p.limit {
			return
		}
		if size == keep {
			continue
		}
		p.idle -= int64(size) * int64(len(l))
		delete(p.free, size)
	}
	if l := p.free[keep]; p.idle+need > p.limit && len(l) > 0 {
		// Still over (the limit shrank): trim the kept size too.
		for len(l) > 0 && p.idle+need > p.limit {
			l[len(l)-1] = nil
			l = l[:len(l)-1]
			p.idle -= int64(keep)
		}
		p.free[keep] = l
	}
}

// Alloc returns a tensor of the given dtype and shape whose buffer may be a
// recycled one: its contents are unspecified, so the caller must write
// every element. Use New for a zeroed tensor.
func Alloc(dt DType, shape ...int) *Tensor {
	n := NumElements(shape) * dt.Size()
	return &Tensor{DType: dt, Shape: append([]int(nil), shape...), Data: buffers.get(n), recyclable: true}
}

// AllocBytes returns a buffer of n bytes for a tensor that WrapRecyclable
// will own; its contents are unspecified.
func AllocBytes(n int) []byte { return buffers.get(n) }

// WrapRecyclable makes a recyclable tensor of a buffer from AllocBytes that
// nothing else references.
func WrapRecyclable(dt DType, shape []int, data []byte) *Tensor {
	return &Tensor{DType: dt, Shape: shape, Data: data, recyclable: true}
}

// Share records that t is referenced from more than one place, so Recycle
// leaves its buffer alone. Call it before making the second reference.
func (t *Tensor) Share() { t.recyclable = false }

// Recyclable reports whether Recycle would give t's buffer back.
func (t *Tensor) Recyclable() bool { return t.recyclable }

// Recycle gives t's buffer to the pool if t came from Alloc and was never
// shared, and empties t, so a holder that was not the last fails loudly
// rather than reading another sample's pixels. It is a no-op otherwise.
func (t *Tensor) Recycle() {
	if !t.recyclable {
		return
	}
	t.recyclable = false
	b := t.Data
	t.Data = nil
	buffers.put(b)
}
