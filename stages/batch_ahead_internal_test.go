package stages

import (
	"context"
	"fmt"
	"testing"
	"unsafe"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/tensor"
)

// aheadHarness runs a batch stage that converts images to float as they
// arrive, with a stand-in for the engine's budget: reserved counts what
// the samples and the stage hold of it, as engine/flow.go books it.
type aheadHarness struct {
	t        *testing.T
	b        *batchStage
	reserved int64
	// full makes TryReserve fail, as a budget with no room left.
	full  bool
	out   []*sample.Sample
	addrs []uintptr // of each batch's buffer, as it was made
}

// The images are 104×106×3, over the pool's smallest size, and a size no
// other test of the package asks the pool for, so no other test takes the
// idle buffers these tests expect.
const aheadH, aheadW, aheadC = 104, 106, 3

func newAheadHarness(t *testing.T, size int, drop bool) *aheadHarness {
	h := &aheadHarness{t: t}
	env := &Env{
		TryReserve: func(n int64) bool {
			if h.full {
				return false
			}
			h.reserved += n
			return true
		},
		Shrink: func(s *sample.Sample, n int64) {
			n = min(n, s.Held)
			s.Held -= n
			h.reserved -= n
		},
		Release: func(s *sample.Sample) { h.reserved -= s.Held; s.Held = 0 },
		Hand:    func(to, from *sample.Sample) { to.Held += from.Held; from.Held = 0 },
	}
	lut := tensor.AffineLUT([]float32{0}, []float32{1}, "to_float")
	h.b = &batchStage{env: env, cfg: &BatchConfig{Size: size, DropRemainder: drop}, pad: map[string]float64{},
		deferred: map[string]*tensor.FloatLUT{"image": lut}}
	return h
}

// sample makes sample i, its image's bytes i*7+j, reserved as an
// upstream stage reserves it.
func (h *aheadHarness) sample(i int, shape ...int) *sample.Sample {
	if shape == nil {
		shape = []int{aheadH, aheadW, aheadC}
	}
	img := tensor.Alloc(tensor.Uint8, shape...)
	for j := range img.Data {
		img.Data[j] = byte(i*7 + j)
	}
	s := sample.New(int64(i), 0, fmt.Sprintf("photo %d", i))
	s.Fields["image"] = img
	s.Fields["label"] = int64(i)
	s.Held = sample.ValueSize(img) + sample.ValueSize(int64(i))
	h.reserved += s.Held
	return s
}

func (h *aheadHarness) emit(out *sample.Sample) error {
	h.out = append(h.out, out)
	h.addrs = append(h.addrs, uintptr(unsafe.Pointer(unsafe.SliceData(out.Fields["image"].(*tensor.Tensor).Data))))
	return nil
}

func (h *aheadHarness) process(s *sample.Sample) error {
	return h.b.Process(context.Background(), s, h.emit)
}

func (h *aheadHarness) endEpoch() error { return h.b.EndEpoch(context.Background(), 0, h.emit) }

// consume is the stage below taking batch k: it releases what the batch
// holds and gives its buffer back to the pool.
func (h *aheadHarness) consume(k int) {
	out := h.out[k]
	h.reserved -= out.Held
	out.Held = 0
	out.Fields["image"].(*tensor.Tensor).Recycle()
}

// check fails unless batch k holds, converted, the images of the samples
// first, first+1, ….
func (h *aheadHarness) check(k, first int) {
	h.t.Helper()
	out := h.out[k].Fields["image"].(*tensor.Tensor)
	n := aheadH * aheadW * aheadC
	rows := out.Shape[0]
	if out.DType != tensor.Float32 || out.Len() != rows*n {
		h.t.Fatalf("batch %d is %s, want float32[%d %d %d %d]", k, out, rows, aheadH, aheadW, aheadC)
	}
	for i := range rows {
		for j := range n {
			if got, want := out.At(i*n+j), float64(float32(byte((first+i)*7+j))/255); got != want {
				h.t.Fatalf("batch %d row %d element %d = %v, want %v", k, i, j, got, want)
			}
		}
	}
	labels := h.out[k].Fields["label"].(*tensor.Tensor).Int64()
	for i, l := range labels {
		if l != int64(first+i) {
			h.t.Fatalf("batch %d labels %v, want from %d", k, labels, first)
		}
	}
}

// TestBatchConvertsImagesAsTheyArrive: each image is converted into the
// batch as it arrives and its buffer recycled at once, its bytes given
// back to the budget; the batches hold the same values as stacked at the
// end; the second batch reuses the first's buffer once the stage below
// gave it back, and the short last batch does too. Nothing stays
// reserved.
func TestBatchConvertsImagesAsTheyArrive(t *testing.T) {
	h := newAheadHarness(t, 4, false)
	for i := range 10 {
		s := h.sample(i)
		img := s.Fields["image"].(*tensor.Tensor)
		if err := h.process(s); err != nil {
			t.Fatal(err)
		}
		if img.Data != nil || img.Recyclable() {
			t.Fatalf("sample %d: image still held after the batch stage took it", i)
		}
		if i%4 == 3 {
			h.check(len(h.out)-1, i-3)
			h.consume(len(h.out) - 1)
		} else if s.Held != 64+8 {
			t.Fatalf("sample %d holds %d bytes of the budget once its image is converted, want 72 (its map and label)", i, s.Held)
		}
		// Every batch made so far was consumed: what is reserved is
		// what the stage holds.
		if got := h.b.Holding(); got != h.reserved {
			t.Fatalf("after sample %d: Holding() = %d, want the %d bytes reserved", i, got, h.reserved)
		}
	}
	if err := h.endEpoch(); err != nil {
		t.Fatal(err)
	}
	if len(h.out) != 3 {
		t.Fatalf("%d batches, want 3", len(h.out))
	}
	h.check(2, 8)
	if a := h.addrs; a[1] != a[0] || a[2] != a[0] {
		t.Errorf("batches in buffers %x; want all three in the first's", a)
	}
	h.consume(2)
	if h.reserved != 0 {
		t.Errorf("%d bytes still reserved after every batch was consumed, want 0", h.reserved)
	}
}

// TestBatchWaitsForThePreviousBuffer: while the stage below still holds
// the previous batch, the samples of the next wait as images (a buffer of
// their own would be fresh memory); once it gives the buffer back, the
// next sample's arrival converts them all.
func TestBatchWaitsForThePreviousBuffer(t *testing.T) {
	h := newAheadHarness(t, 3, false)
	var imgs []*tensor.Tensor
	for i := range 5 {
		s := h.sample(i)
		imgs = append(imgs, s.Fields["image"].(*tensor.Tensor))
		if err := h.process(s); err != nil {
			t.Fatal(err)
		}
	}
	if imgs[3].Data == nil || imgs[4].Data == nil {
		t.Fatal("the second batch's images were converted while the first batch was still held below")
	}
	h.consume(0)
	s := h.sample(5)
	imgs = append(imgs, s.Fields["image"].(*tensor.Tensor))
	if err := h.process(s); err != nil {
		t.Fatal(err)
	}
	for i, img := range imgs {
		if img.Data != nil {
			t.Errorf("image %d still held after its batch was made", i)
		}
	}
	h.check(1, 3)
	if a := h.addrs; a[1] != a[0] {
		t.Errorf("second batch in %x, want the first's buffer %x", a[1], a[0])
	}
	h.consume(1)
	if h.reserved != 0 {
		t.Errorf("%d bytes still reserved, want 0", h.reserved)
	}
}

// TestBatchAheadShapeError: an image of another shape after some were
// converted fails the batch, naming both samples and shapes, as when all
// are stacked at the end; the buffer goes back to the pool and nothing
// stays reserved.
func TestBatchAheadShapeError(t *testing.T) {
	h := newAheadHarness(t, 4, false)
	for i := range 4 {
		shape := []int{aheadH, aheadW, aheadC}
		if i == 2 {
			shape[1]++
		}
		s := h.sample(i, shape...)
		err := h.process(s)
		if i < 3 && err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			want := `batch 0 (epoch 0) of photo 0 … photo 3: field "image": shapes differ within a batch (photo 0 is uint8[104 106 3], photo 2 is uint8[104 107 3]); resize first`
			if err == nil || err.Error() != want {
				t.Fatalf("error %v, want %s", err, want)
			}
		}
	}
	if len(h.out) != 0 || h.reserved != 0 {
		t.Errorf("%d batches out, %d bytes still reserved; want none", len(h.out), h.reserved)
	}
	if got := tensor.AllocIdle(tensor.Float32, 4, aheadH, aheadW, aheadC); got == nil {
		t.Error("the batch's buffer did not go back to the pool")
	} else {
		got.Recycle()
	}
}

// TestBatchAheadDropRemainder: with drop_remainder, the samples of the
// last, short batch are dropped, and so is the batch they were converted
// into, its reservation with it.
func TestBatchAheadDropRemainder(t *testing.T) {
	h := newAheadHarness(t, 4, true)
	for i := range 6 {
		if err := h.process(h.sample(i)); err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			h.consume(0)
		}
	}
	if err := h.endEpoch(); err != nil {
		t.Fatal(err)
	}
	if len(h.out) != 1 || h.reserved != 0 {
		t.Errorf("%d batches, %d bytes still reserved; want 1 and none", len(h.out), h.reserved)
	}
}

// TestBatchAheadSharedImage: an image something else also refers to (a
// fan-out, a cache) is converted but neither recycled nor given back to
// the budget.
func TestBatchAheadSharedImage(t *testing.T) {
	h := newAheadHarness(t, 2, false)
	s := h.sample(0)
	img := s.Fields["image"].(*tensor.Tensor)
	img.Share()
	held := s.Held
	if err := h.process(s); err != nil {
		t.Fatal(err)
	}
	if img.Data == nil || s.Held != held {
		t.Fatalf("shared image: data kept %v, held %d; want kept and %d", img.Data != nil, s.Held, held)
	}
	if err := h.process(h.sample(1)); err != nil {
		t.Fatal(err)
	}
	h.check(0, 0)
	if img.Data == nil {
		t.Error("shared image recycled when its batch was made")
	}
	h.consume(0)
	if h.reserved != 0 {
		t.Errorf("%d bytes still reserved, want 0", h.reserved)
	}
}

// TestBatchAheadWithNoRoomToReserve: when the budget has no room for the
// float batch's buffer, the images wait as they are and are stacked at
// the end, as before conversion ahead; the buffer goes back to the pool
// untouched and nothing stays reserved.
func TestBatchAheadWithNoRoomToReserve(t *testing.T) {
	h := newAheadHarness(t, 3, false)
	h.full = true
	var imgs []*tensor.Tensor
	for i := range 3 {
		s := h.sample(i)
		imgs = append(imgs, s.Fields["image"].(*tensor.Tensor))
		if err := h.process(s); err != nil {
			t.Fatal(err)
		}
		if i < 2 && imgs[i].Data == nil {
			t.Fatalf("image %d converted with no room to reserve its batch's buffer", i)
		}
	}
	h.check(0, 0)
	h.consume(0)
	if h.reserved != 0 {
		t.Errorf("%d bytes still reserved, want 0", h.reserved)
	}
}

// TestBatchDropGivesEverythingBack: when the stages below stop part-way
// through a batch (a take that has its count), Drop gives back the
// samples the stage holds and the float batch it was filling: nothing
// stays reserved and the buffer is idle in the pool. Found in review.
func TestBatchDropGivesEverythingBack(t *testing.T) {
	// Idle buffers other tests left would pass for the one Drop gives
	// back: hold them until the end.
	var idle []*tensor.Tensor
	for b := tensor.AllocIdle(tensor.Float32, 4, aheadH, aheadW, aheadC); b != nil; b = tensor.AllocIdle(tensor.Float32, 4, aheadH, aheadW, aheadC) {
		idle = append(idle, b)
	}
	defer func() {
		for _, b := range idle {
			b.Recycle()
		}
	}()
	h := newAheadHarness(t, 4, false)
	for i := range 3 {
		if err := h.process(h.sample(i)); err != nil {
			t.Fatal(err)
		}
	}
	if h.reserved == 0 || len(h.b.rows) != 1 {
		t.Fatalf("reserved %d, %d batches being filled; want some, and one", h.reserved, len(h.b.rows))
	}
	// What a stuck run's message says the batch holds: all of it.
	if got := h.b.Holding(); got != h.reserved {
		t.Errorf("Holding() = %d, want the %d bytes reserved", got, h.reserved)
	}
	h.b.Drop()
	if h.b.Holding() != 0 {
		t.Errorf("Holding() = %d after Drop, want 0", h.b.Holding())
	}
	if h.reserved != 0 || len(h.b.buf) != 0 || len(h.b.rows) != 0 {
		t.Errorf("after Drop: %d bytes reserved, %d samples and %d batches held; want none", h.reserved, len(h.b.buf), len(h.b.rows))
	}
	if got := tensor.AllocIdle(tensor.Float32, 4, aheadH, aheadW, aheadC); got == nil {
		t.Error("the batch's buffer did not go back to the pool")
	} else {
		got.Recycle()
	}
}
