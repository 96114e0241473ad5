package tensor

import (
	"testing"
	"unsafe"
)

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// withPool runs f against an empty pool of the given limit.
func withPool(t *testing.T, limit int64, f func()) {
	t.Helper()
	buffers.mu.Lock()
	free, idle, old := buffers.free, buffers.idle, buffers.limit
	buffers.free, buffers.idle, buffers.limit = map[int][][]byte{}, 0, limit
	buffers.mu.Unlock()
	defer func() {
		buffers.mu.Lock()
		buffers.free, buffers.idle, buffers.limit = free, idle, old
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

func TestPoolLimitEvictsOtherSizes(t *testing.T) {
	const big, small = 4 << 20, 64 << 10
	withPool(t, 5<<20, func() {
		var smalls []*Tensor
		for i := 0; i < 8; i++ {
			smalls = append(smalls, Alloc(Uint8, small))
		}
		for _, s := range smalls {
			s.Recycle()
		}
		if got := PoolIdle(); got != 8*small {
			t.Fatalf("PoolIdle = %d, want %d", got, 8*small)
		}
		b := Alloc(Uint8, big)
		b.Recycle() // 4 MiB + 512 KiB fits under 5 MiB
		if got := PoolIdle(); got != big+8*small {
			t.Fatalf("PoolIdle = %d, want %d", got, big+8*small)
		}
		c := Alloc(Uint8, big)
		d := Alloc(Uint8, big)
		c.Recycle()
		// d does not fit beside c: the small buffers go, and then still
		// only one 4 MiB buffer fits.
		d.Recycle()
		if got := PoolIdle(); got != big {
			t.Fatalf("PoolIdle = %d, want %d (one big buffer)", got, big)
		}
		if old := SetPoolLimit(0); old != 5<<20 {
			t.Fatalf("SetPoolLimit returned %d, want the old limit %d", old, 5<<20)
		}
		if PoolIdle() != 0 {
			t.Fatalf("PoolIdle = %d after SetPoolLimit(0)", PoolIdle())
		}
	})
}
