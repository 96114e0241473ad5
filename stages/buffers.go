package stages

import "sync/atomic"

// Buffers is the share of the memory budget that the stages holding many
// samples at once fill together: shuffle buffers and in-memory caches,
// half the budget in all, however many of them a pipeline has. Each took
// half of its own, so two shuffles filled the whole budget and the run
// stalled at any size of it (found by a memory audit). The shuffles split
// the share evenly: one that took all of it starved the other, and a mix
// of the two waited for the starved one. A cache cannot give samples
// back, so it counts only against the caches; a shuffle gives samples
// back while all of them together hold more than the share.
type Buffers struct {
	room     int64
	shuffles int64
	held     atomic.Int64 // by every buffer
	kept     atomic.Int64 // by in-memory caches
}

// NewBuffers returns the buffers' share of a budget of memory bytes (0: no
// budget, no bound) for a pipeline of the given number of shuffles.
func NewBuffers(memory int64, shuffles int) *Buffers {
	return &Buffers{room: memory / ShuffleShare, shuffles: int64(max(1, shuffles))}
}

// Room returns the bytes the buffers may hold together.
func (b *Buffers) Room() int64 { return b.room }

// ShuffleRoom returns the bytes one shuffle may hold.
func (b *Buffers) ShuffleRoom() int64 { return b.room / b.shuffles }

// fits reports whether a shuffle holding own bytes may take n more.
func (b *Buffers) fits(own, n int64) bool {
	return b.room <= 0 || own+n <= b.ShuffleRoom() && b.held.Load()+n <= b.room
}

// over reports whether a shuffle holding own bytes holds more than its
// share, or the buffers together more than theirs, so it should give
// samples back.
func (b *Buffers) over(own int64) bool {
	return b.room > 0 && (own > b.ShuffleRoom() || b.held.Load() > b.room)
}

// keeps reports whether an in-memory cache may keep n more bytes.
func (b *Buffers) keeps(n int64) bool { return b.room <= 0 || b.kept.Load()+n <= b.room }

// add counts n more bytes held (negative: given back) by a shuffle.
func (b *Buffers) add(n int64) { b.held.Add(n) }

// keep counts n more bytes kept by an in-memory cache.
func (b *Buffers) keep(n int64) {
	b.held.Add(n)
	b.kept.Add(n)
}
