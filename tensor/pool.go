package tensor

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

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

// staleGets is how many requests for other sizes make a size stale: its
// idle buffers are then the first to go when the pool is full.
const staleGets = 512

type pool struct {
	mu    sync.Mutex
	limit int64
	// room, when a run has bound the pool to its memory budget, replaces
	// limit: the budget's free bytes, so that idle buffers and samples
	// together stay within it (see BindPool).
	room func() int64
	idle int64 // bytes in free and old
	// idleNow mirrors idle for readers that must not take the lock: the
	// budget reads it on every reservation.
	idleNow atomic.Int64
	free    map[int][][]byte // by exact byte length
	// old holds the buffers that were idle through the last aging (see
	// collected); the next one drops them, as sync.Pool's victim cache
	// does at each collection. So a pool nobody draws from empties within
	// two agings, and garbage collection drives the aging.
	old map[int][][]byte
	// tick counts get calls; asked records the tick of each size's last.
	tick  uint64
	asked map[int]uint64
	aged  time.Time // when collected last aged the pool
}

var buffers = pool{limit: DefaultPoolLimit, free: map[int][][]byte{}, old: map[int][][]byte{}, asked: map[int]uint64{}}

func init() { armGCHook() }

// armGCHook calls buffers.collected and the OnGC functions after the next
// garbage collection, and again after each one after that.
func armGCHook() {
	sentinel := new([16]byte)
	runtime.AddCleanup(sentinel, func(struct{}) {
		buffers.collected()
		gcHooks.Lock()
		fs := gcHooks.fs
		gcHooks.Unlock()
		for _, f := range fs {
			f()
		}
		armGCHook()
	}, struct{}{})
}

var gcHooks struct {
	sync.Mutex
	fs []func()
}

// OnGC calls f after every garbage collection from now on, as the tensor
// pool ages its idle buffers, so that other pools of scratch memory can age
// theirs with the same clock. f runs on the runtime's cleanup goroutine and
// must be quick.
func OnGC(f func()) {
	gcHooks.Lock()
	defer gcHooks.Unlock()
	gcHooks.fs = append(gcHooks.fs, f)
}

// agePeriod is the least time between two agings of the pool. With tensors
// recycled, a pipeline's collections come every few tens of milliseconds
// (W1: 85 in 4 s), faster than a batch's worth of recycled samples is
// drawn again; aging at each would throw away the buffers it exists for.
const agePeriod = time.Second

// collected ages the pool after a garbage collection, at most once per
// agePeriod: buffers idle since the previous aging are dropped.
func (p *pool) collected() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if now.Sub(p.aged) < agePeriod {
		return
	}
	p.aged = now
	p.age()
}

// age drops the buffers of the old generation and makes the current one old.
func (p *pool) age() {
	for size, l := range p.old {
		p.idle -= int64(size) * int64(len(l))
	}
	p.old, p.free = p.free, map[int][][]byte{}
	p.idleNow.Store(p.idle)
}

// take pops a buffer of n bytes from m, if it has one.
func (p *pool) take(m map[int][][]byte, n int) []byte {
	l := m[n]
	if len(l) == 0 {
		return nil
	}
	b := l[len(l)-1]
	l[len(l)-1] = nil
	if l = l[:len(l)-1]; len(l) == 0 {
		delete(m, n)
	} else {
		m[n] = l
	}
	p.idle -= int64(n)
	return b
}

// capLocked is how many idle bytes the pool may hold now.
func (p *pool) capLocked() int64 {
	if p.room != nil {
		return max(0, p.room())
	}
	return p.limit
}

// BindPool makes the pool keep idle buffers only within room(), the free
// bytes of a run's memory budget, instead of a fixed limit: so a run whose
// budget binds keeps few idle buffers, and one whose budget is loose keeps
// exactly the buffers its steady state cycles through instead of dropping
// and reallocating them (garbage the collector frees late, and fresh pages
// faulted in again). The run's budget calls TrimPool when a reservation
// leaves less room than the pool holds. The pool is the process's, so only
// one run can bind it: ok is false if another has; unbind restores the
// fixed limit.
func BindPool(room func() int64) (unbind func(), ok bool) {
	buffers.mu.Lock()
	defer buffers.mu.Unlock()
	if buffers.room != nil {
		return nil, false
	}
	buffers.room = room
	buffers.evict(max(0, room()), 0, 0)
	buffers.idleNow.Store(buffers.idle)
	return sync.OnceFunc(func() {
		buffers.mu.Lock()
		defer buffers.mu.Unlock()
		buffers.room = nil
		buffers.evict(buffers.limit, 0, 0)
		buffers.idleNow.Store(buffers.idle)
	}), true
}

// TrimPool drops idle buffers until the pool holds at most n bytes.
func TrimPool(n int64) {
	buffers.mu.Lock()
	defer buffers.mu.Unlock()
	buffers.evict(max(0, n), 0, 0)
	buffers.idleNow.Store(buffers.idle)
}

// SetPoolLimit sets how many bytes of idle buffers the recycling pool may
// keep (0 disables it) while no run has bound it (BindPool), and returns
// the previous limit. Buffers beyond the limit are left to the garbage
// collector.
func SetPoolLimit(n int64) int64 {
	buffers.mu.Lock()
	defer buffers.mu.Unlock()
	old := buffers.limit
	buffers.limit = n
	buffers.evict(n, 0, 0)
	buffers.idleNow.Store(buffers.idle)
	return old
}

// PoolIdle returns the bytes of idle buffers the pool holds.
func PoolIdle() int64 { return buffers.idleNow.Load() }

func (p *pool) get(n int) []byte {
	if n < poolMinBytes {
		return make([]byte, n)
	}
	if b := p.idleBuffer(n); b != nil {
		return b
	}
	b := make([]byte, n)
	AdviseHuge(b)
	return b
}

// idleBuffer returns an idle buffer of exactly n bytes, or nil: it never
// allocates.
func (p *pool) idleBuffer(n int) []byte {
	if n < poolMinBytes {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tick++
	p.asked[n] = p.tick
	b := p.take(p.free, n)
	if b == nil {
		b = p.take(p.old, n)
	}
	p.idleNow.Store(p.idle)
	return b
}

// put keeps b, all of its capacity, for the next get of that many bytes:
// a short batch's tensor (AllocShort) holds only the first bytes of a
// full batch's buffer. So b must begin the buffer get returned, never
// start inside it: every recyclable tensor's Data does (see
// WrapRecyclable).
func (p *pool) put(b []byte) {
	b = b[:cap(b)]
	n := len(b)
	if n < poolMinBytes {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	defer func() { p.idleNow.Store(p.idle) }()
	if limit := p.capLocked(); p.idle+int64(n) > limit && !p.evict(limit, int64(n), n) {
		return
	}
	p.free[n] = append(p.free[n], b)
	p.idle += int64(n)
	if p.room != nil {
		// A reservation that landed after capLocked read the room has
		// trimmed the pool by the idle bytes it saw, without this buffer:
		// publish them and look at the room again, so one of the two
		// sides sees the other.
		p.idleNow.Store(p.idle)
		if limit := p.capLocked(); p.idle > limit {
			p.evict(limit, 0, 0)
		}
	}
}

// evict drops idle buffers until need more bytes fit under limit, and
// reports whether they do. Buffers idle through an aging go first, then
// stale sizes (the last, short batch of an epoch; the images of a stage
// that has finished); then buffers of the smallest size, one at a time,
// unless the newcomer's own size (keep) is the smallest, which is then the
// one to drop. A small buffer is cheap to allocate again; a large one, a
// stacked batch, costs a run of contiguous fresh pages, and dropping it
// fragments the heap for the next. So the rush of samples from a shuffle
// draining at the end of an epoch cannot flush out the batch buffers.
func (p *pool) evict(limit, need int64, keep int) bool {
	for size, l := range p.old {
		if p.idle+need <= limit {
			return true
		}
		p.idle -= int64(size) * int64(len(l))
		delete(p.old, size)
	}
	for size, l := range p.free {
		if p.idle+need <= limit {
			return true
		}
		if p.tick-p.asked[size] > staleGets {
			p.idle -= int64(size) * int64(len(l))
			delete(p.free, size)
		}
	}
	for size, a := range p.asked {
		if p.tick-a > staleGets && len(p.free[size]) == 0 && len(p.old[size]) == 0 {
			delete(p.asked, size) // bound the map by the sizes in use
		}
	}
	if p.idle+need <= limit {
		return true
	}
	// Only sizes below the newcomer's give way: if dropping all of them
	// would not make room, drop the newcomer and keep them.
	if keep > 0 {
		var smaller int64
		for size, l := range p.free {
			if size < keep {
				smaller += int64(size) * int64(len(l))
			}
		}
		if p.idle-smaller+need > limit {
			return false
		}
	}
	for p.idle+need > limit {
		least := 0
		for size := range p.free {
			if least == 0 || size < least {
				least = size
			}
		}
		if least == 0 || keep > 0 && least >= keep {
			return false
		}
		p.take(p.free, least)
	}
	return true
}

// Alloc returns a tensor of the given dtype and shape whose buffer may be a
// recycled one: its contents are unspecified, so the caller must write
// every element. Use New for a zeroed tensor.
func Alloc(dt DType, shape ...int) *Tensor {
	n := NumElements(shape) * dt.Size()
	t := &Tensor{DType: dt, Shape: append([]int(nil), shape...), Data: buffers.get(n), pooled: n}
	t.recyclable.Store(true)
	return t
}

// AllocShort is Alloc for a batch of the given shape that is shorter than
// the full batches of its stage, which have rows rows (shape[0] < rows):
// if the pool holds an idle buffer of a full batch, the tensor's Data is
// its first bytes, and Recycle gives the whole buffer back. An epoch's
// last batch is most often short, and with a buffer of its own it is fresh
// memory written once an epoch: in W1's 2-epoch run, 4.6 of the 51 MiB
// whose first write the process pays for (a page fault each 4 KiB, and
// the host's in a virtual machine). The tensor's budget charge counts the
// whole buffer (HeldBytes).
func AllocShort(dt DType, rows int, shape ...int) *Tensor {
	if len(shape) > 0 && shape[0] > 0 && shape[0] < rows {
		row := NumElements(shape[1:]) * dt.Size()
		if b := buffers.idleBuffer(row * rows); b != nil {
			t := &Tensor{DType: dt, Shape: append([]int(nil), shape...), Data: b[:row*shape[0]], pooled: len(b)}
			t.recyclable.Store(true)
			return t
		}
	}
	return Alloc(dt, shape...)
}

// AllocIdle is Alloc from an idle buffer of the pool, or nil if it has
// none of that size: it never takes fresh memory.
func AllocIdle(dt DType, shape ...int) *Tensor {
	n := NumElements(shape) * dt.Size()
	b := buffers.idleBuffer(n)
	if b == nil {
		return nil
	}
	t := &Tensor{DType: dt, Shape: append([]int(nil), shape...), Data: b, pooled: n}
	t.recyclable.Store(true)
	return t
}

// AllocBytes returns a buffer of n bytes for a tensor that WrapRecyclable
// will own; its contents are unspecified.
func AllocBytes(n int) []byte { return buffers.get(n) }

// WrapRecyclable makes a recyclable tensor of a buffer from AllocBytes that
// nothing else references. data must be the buffer as AllocBytes returned
// it, or its first bytes: Recycle gives the pool all of its capacity.
func WrapRecyclable(dt DType, shape []int, data []byte) *Tensor {
	t := &Tensor{DType: dt, Shape: shape, Data: data, pooled: cap(data)}
	t.recyclable.Store(true)
	return t
}

// Share records that t is referenced from more than one place, so Recycle
// leaves its buffer alone. Call it before making the second reference.
// The flag is atomic because a fan-out further down shares a tensor again
// while a copy in another branch may be recycling it.
func (t *Tensor) Share() { t.recyclable.Store(false) }

// Recyclable reports whether Recycle would give t's buffer back.
func (t *Tensor) Recyclable() bool { return t.recyclable.Load() }

// Recycle gives t's buffer to the pool if t came from Alloc and was never
// shared, and empties t, so a holder that was not the last fails loudly
// rather than reading another sample's pixels. It is a no-op otherwise.
func (t *Tensor) Recycle() {
	if !t.recyclable.Swap(false) {
		return
	}
	b := t.Data
	t.Data, t.pooled = nil, 0
	buffers.put(b)
}
