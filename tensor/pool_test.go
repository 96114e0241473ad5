package tensor

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
	"unsafe"
)

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// withPool runs f against an empty pool of the given limit, with automatic
// garbage collection (which ages the pool) off.
func withPool(t *testing.T, limit int64, f func()) {
	t.Helper()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	buffers.mu.Lock()
	free, aged, idle, old, agedAt, room := buffers.free, buffers.old, buffers.idle, buffers.limit, buffers.aged, buffers.room
	buffers.free, buffers.old, buffers.idle, buffers.limit, buffers.asked, buffers.room = map[int][][]byte{}, map[int][][]byte{}, 0, limit, map[int]uint64{}, nil
	buffers.idleNow.Store(0)
	// A collection from before the test can still run its cleanup, and
	// so age the pool, at any moment: hold aging off until the test ends
	// (the tests that age call age themselves).
	buffers.aged = time.Now().Add(time.Hour)
	buffers.mu.Unlock()
	defer func() {
		buffers.mu.Lock()
		buffers.free, buffers.old, buffers.idle, buffers.limit, buffers.aged, buffers.room = free, aged, idle, old, agedAt, room
		buffers.idleNow.Store(idle)
		buffers.mu.Unlock()
	}()
	f()
}

func TestRecycleReusesTheBuffer(t *testing.T) {
	withPool(t, 1<<30, func() {
		a := Alloc(Float32, 224, 224, 3)
		if !a.Recyclable() || len(a.Data) != 224*224*3*4 {
			t.Fatalf("Alloc gave recyclable=%v len=%d", a.Recyclable(), len(a.Data))
		}
		p := addr(a.Data)
		a.Recycle()
		if a.Data != nil || a.Recyclable() {
			t.Fatalf("a recycled tensor keeps Data (len %d) or stays recyclable", len(a.Data))
		}
		if got := PoolIdle(); got != 224*224*3*4 {
			t.Fatalf("PoolIdle = %d, want %d", got, 224*224*3*4)
		}
		a.Recycle() // a second Recycle must not put the buffer twice
		if got := PoolIdle(); got != 224*224*3*4 {
			t.Fatalf("PoolIdle after a double Recycle = %d", got)
		}
		b := Alloc(Uint8, 224*224*3*4) // same byte size, other dtype
		if addr(b.Data) != p {
			t.Fatal("Alloc of the same size did not reuse the recycled buffer")
		}
		if PoolIdle() != 0 {
			t.Fatalf("PoolIdle = %d after reuse, want 0", PoolIdle())
		}
	})
}

// TestAllocShortBorrowsAFullBuffer: a short batch takes an idle full
// batch's buffer and gives all of it back; with none idle, or for a full
// batch, it allocates its own, exactly as Alloc does.
func TestAllocShortBorrowsAFullBuffer(t *testing.T) {
	const row = 224 * 224 * 3 * 4
	withPool(t, 1<<30, func() {
		own := AllocShort(Float32, 32, 8, 224, 224, 3) // nothing idle
		if len(own.Data) != 8*row || cap(own.Data) != 8*row || !own.Recyclable() {
			t.Fatalf("short batch with no idle buffer: len %d cap %d recyclable %v, want len = cap = %d", len(own.Data), cap(own.Data), own.Recyclable(), 8*row)
		}
		full := Alloc(Float32, 32, 224, 224, 3)
		p := addr(full.Data)
		full.Recycle()
		short := AllocShort(Float32, 32, 8, 224, 224, 3)
		if addr(short.Data) != p || len(short.Data) != 8*row || cap(short.Data) != 32*row {
			t.Fatalf("short batch: len %d cap %d, reused the full buffer %v; want len %d cap %d from the full buffer",
				len(short.Data), cap(short.Data), addr(short.Data) == p, 8*row, 32*row)
		}
		if got := short.Shape; len(got) != 4 || got[0] != 8 || got[1] != 224 || got[3] != 3 || short.Len() != 8*224*224*3 {
			t.Fatalf("short batch shape %v len %d", got, short.Len())
		}
		if PoolIdle() != 0 {
			t.Fatalf("PoolIdle = %d with the full buffer lent, want 0", PoolIdle())
		}
		if got := short.HeldBytes(); got != 32*row {
			t.Fatalf("the short batch holds %d bytes, want the whole buffer's %d", got, 32*row)
		}
		short.Recycle()
		if got := PoolIdle(); got != 32*row {
			t.Fatalf("PoolIdle = %d after the short batch's Recycle, want the full buffer's %d", got, 32*row)
		}
		again := Alloc(Float32, 32, 224, 224, 3)
		if addr(again.Data) != p || len(again.Data) != 32*row {
			t.Fatal("the next full batch did not get the whole buffer back")
		}
		again.Recycle()
		if f := AllocShort(Float32, 32, 32, 224, 224, 3); addr(f.Data) != p || len(f.Data) != 32*row || cap(f.Data) != 32*row {
			t.Fatalf("a full batch from AllocShort: len %d cap %d, from the idle buffer %v; want Alloc's: that buffer, %d bytes", len(f.Data), cap(f.Data), addr(f.Data) == p, 32*row)
		}
		own.Recycle()
		if got := PoolIdle(); got != 8*row {
			t.Fatalf("PoolIdle = %d after the own short buffer's Recycle, want %d", got, 8*row)
		}
		if got := short.HeldBytes(); got != 0 {
			t.Errorf("a recycled tensor holds %d bytes, want 0", got)
		}
	})
}

func TestSharedAndForeignTensorsAreNotRecycled(t *testing.T) {
	withPool(t, 1<<30, func() {
		for _, tc := range []struct {
			name string
			make func() *Tensor
		}{
			{"shared", func() *Tensor { a := Alloc(Uint8, 1<<20); a.Share(); return a }},
			{"New", func() *Tensor { return New(Uint8, 1<<20) }},
			{"FromBytes", func() *Tensor { x, _ := FromBytes(Uint8, []int{1 << 20}, make([]byte, 1<<20)); return x }},
			{"Clone", func() *Tensor { return Alloc(Uint8, 1<<20).Clone() }},
			{"small", func() *Tensor { return Alloc(Uint8, 100) }},
		} {
			x := tc.make()
			n := len(x.Data)
			x.Recycle()
			if PoolIdle() != 0 {
				t.Errorf("%s: Recycle pooled %d bytes, want 0", tc.name, PoolIdle())
			}
			if tc.name != "small" && len(x.Data) != n {
				t.Errorf("%s: Recycle emptied a tensor it does not own", tc.name)
			}
		}
	})
}

func TestPoolLimitPrefersLargeBuffers(t *testing.T) {
	const big, small = 4 << 20, 512 << 10
	withPool(t, 6<<20, func() {
		var smalls []*Tensor
		for i := 0; i < 13; i++ {
			smalls = append(smalls, Alloc(Uint8, small))
		}
		b := Alloc(Uint8, big)
		// A burst of small buffers fills the pool to its limit; the
		// thirteenth is the smallest size, so it is the one dropped.
		for _, s := range smalls {
			s.Recycle()
		}
		if got := PoolIdle(); got != 12*small {
			t.Fatalf("PoolIdle = %d, want %d", got, 12*small)
		}
		// The big buffer makes room by evicting small ones.
		b.Recycle()
		if got := PoolIdle(); got != big+4*small {
			t.Fatalf("PoolIdle = %d, want %d (big + 4 small)", got, big+4*small)
		}
		// A second big one would not fit even with every smaller buffer
		// gone: it is dropped, and the small ones stay.
		c := Alloc(Uint8, big) // reuses b's buffer
		d := Alloc(Uint8, big)
		c.Recycle()
		d.Recycle()
		if got := PoolIdle(); got != big+4*small {
			t.Fatalf("PoolIdle = %d, want %d (the second big one dropped)", got, big+4*small)
		}
		// A 1 MiB newcomer makes room by evicting two small ones.
		e := Alloc(Uint8, 1<<20)
		e.Recycle()
		if got := PoolIdle(); got != big+2*small+1<<20 {
			t.Fatalf("PoolIdle = %d, want %d (big + 2 small + 1 MiB)", got, big+2*small+1<<20)
		}
		// After staleGets requests for other sizes the big and the 1 MiB
		// sizes are stale and go first; a 5 MiB newcomer needs both gone.
		for i := 0; i <= staleGets; i++ {
			Alloc(Uint8, small).Recycle()
		}
		f := Alloc(Uint8, 5<<20)
		f.Recycle()
		if got := PoolIdle(); got != 2*small+5<<20 {
			t.Fatalf("PoolIdle = %d, want %d (the stale buffers evicted)", got, 2*small+5<<20)
		}
		if old := SetPoolLimit(0); old != 6<<20 {
			t.Fatalf("SetPoolLimit returned %d, want the old limit %d", old, 6<<20)
		}
		if PoolIdle() != 0 {
			t.Fatalf("PoolIdle = %d after SetPoolLimit(0)", PoolIdle())
		}
	})
}

// TestPoolEmptiesOverTwoAgings: a buffer idle through one aging can still
// be reused; one idle through two is dropped.
func TestPoolEmptiesOverTwoAgings(t *testing.T) {
	withPool(t, 1<<30, func() {
		a, b := Alloc(Uint8, 1<<20), Alloc(Uint8, 1<<20)
		pa := addr(a.Data)
		a.Recycle()
		b.Recycle()
		buffers.age()
		if got := PoolIdle(); got != 2<<20 {
			t.Fatalf("PoolIdle after one aging = %d, want %d", got, 2<<20)
		}
		c := Alloc(Uint8, 1<<20)
		if p := addr(c.Data); p != pa && p != addr(b.Data) && PoolIdle() != 1<<20 {
			t.Fatal("a buffer idle through one aging was not reused")
		}
		buffers.age()
		if got := PoolIdle(); got != 0 {
			t.Fatalf("PoolIdle after two agings = %d, want 0", got)
		}
	})
}

// TestPoolHookRunsOnGC: the real collector ages the pool, at most once per
// agePeriod, so an idle buffer is gone within a few periods.
func TestPoolHookRunsOnGC(t *testing.T) {
	withPool(t, 1<<30, func() {
		buffers.mu.Lock()
		buffers.aged = time.Time{} // withPool holds aging off; this test needs it
		buffers.mu.Unlock()
		Alloc(Uint8, 1<<20).Recycle()
		deadline := time.Now().Add(3*agePeriod + time.Second)
		for PoolIdle() != 0 && time.Now().Before(deadline) {
			runtime.GC()
			time.Sleep(50 * time.Millisecond) // cleanups run on their own goroutine
		}
		if got := PoolIdle(); got != 0 {
			t.Fatalf("PoolIdle = %d after collections over %v, want 0", got, 3*agePeriod)
		}
	})
}

// TestBindPoolKeepsIdleWithinRoom binds the pool to a budget's free room:
// recycled buffers are kept only while they fit the room, TrimPool shrinks
// the pool to a smaller room, a second run cannot bind it, and unbinding
// restores the fixed limit.
func TestBindPoolKeepsIdleWithinRoom(t *testing.T) {
	const kb64 = 64 << 10
	withPool(t, 0, func() {
		room := int64(3 * kb64)
		unbind, ok := BindPool(func() int64 { return room })
		if !ok {
			t.Fatal("BindPool on an unbound pool failed")
		}
		defer unbind()
		if _, ok := BindPool(func() int64 { return 1 << 30 }); ok {
			t.Fatal("a second BindPool succeeded while the pool is bound")
		}
		var ts []*Tensor
		for range 4 {
			ts = append(ts, Alloc(Uint8, kb64))
		}
		for _, x := range ts {
			x.Recycle()
		}
		if got := PoolIdle(); got != 3*kb64 {
			t.Fatalf("PoolIdle = %d after recycling 4 buffers into a room of 3, want %d", got, 3*kb64)
		}
		TrimPool(kb64 + 1)
		if got := PoolIdle(); got != kb64 {
			t.Fatalf("PoolIdle = %d after TrimPool(64KiB+1), want %d", got, kb64)
		}
		room = 0
		x := Alloc(Uint8, 2*kb64)
		x.Recycle()
		if got := PoolIdle(); got != kb64 {
			t.Fatalf("PoolIdle = %d after recycling into no room, want %d", got, kb64)
		}
		unbind()
		if got := PoolIdle(); got != 0 {
			t.Fatalf("PoolIdle = %d after unbinding to a fixed limit of 0, want 0", got)
		}
		again, ok := BindPool(func() int64 { return 0 })
		if !ok {
			t.Fatal("BindPool after unbind failed")
		}
		again()
	})
}

// TestOnGC: a function given to OnGC runs after a collection.
func TestOnGC(t *testing.T) {
	ran := make(chan struct{}, 1)
	OnGC(func() {
		select {
		case ran <- struct{}{}:
		default:
		}
	})
	deadline := time.After(10 * time.Second)
	for {
		runtime.GC()
		select {
		case <-ran:
			return
		case <-deadline:
			t.Fatal("OnGC's function did not run within 10 s of collections")
		case <-time.After(10 * time.Millisecond):
		}
	}
}
