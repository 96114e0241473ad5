// Package budget is the pipeline-wide memory budget: a byte-weighted
// semaphore that every buffer reserves from before it holds a sample, so
// that a full budget turns into backpressure instead of an allocation.
package budget

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/piperun/piperun/internal/bytesize"
)

// Budget is a byte-weighted semaphore with a peak gauge. A nil *Budget
// imposes no limit.
type Budget struct {
	limit int64

	mu      sync.Mutex
	used    int64
	waiters []waiter
	// kept is the part of used that stages hold for the whole run (Keep):
	// no sample can ever have it.
	kept int64

	peak atomic.Int64
	cur  atomic.Int64
	// moves counts reservations and releases, so a watchdog can tell a
	// budget that is busy from one that is stuck.
	moves atomic.Uint64

	// spareIdle and spareTrim, when set, are memory kept idle in the
	// budget's free room (a pool of recycled buffers): each reservation
	// trims it to what stays free, so samples and idle buffers together
	// stay within the limit (give or take a buffer the spare is adding at
	// that moment, which it trims itself).
	spareIdle func() int64
	spareTrim func(max int64)
}

// SetSpare lets memory that is idle but not reserved (a pool of recycled
// buffers) live in the budget's free room: after each reservation, if idle()
// is more than the bytes left free, trim(free) must shrink it to fit. The
// spare never blocks a reservation, so it cannot stall a run; it only has to
// give way. Call it before the budget is shared.
func (b *Budget) SetSpare(idle func() int64, trim func(max int64)) {
	b.spareIdle, b.spareTrim = idle, trim
}

// fitSpare trims the spare to the free room; called outside b.mu, since the
// spare has its own lock.
func (b *Budget) fitSpare() {
	if b.spareIdle == nil {
		return
	}
	if free := b.limit - b.cur.Load(); b.spareIdle() > free {
		b.spareTrim(free)
	}
}

type waiter struct {
	n     int64
	who   string
	rank  int
	ready chan struct{}
}

// Holder names who reserves memory and how far down the pipeline it sits.
// When memory frees, the waiter with the highest Rank is served first (in
// order among equals), and a reservation that fits may pass waiters of a
// lower rank: the stages further down are the ones whose progress frees
// memory, while a stage above only adds to what is held. Served in plain
// order, a stage above waiting for a large batch would hold back the one
// below that needs a few bytes to pass its samples on to the sinks, and
// the run would stop.
type Holder struct {
	Name string
	Rank int
}

// lowest is the rank of holders that pass no waiter.
const lowest = math.MinInt

// TooLargeError reports a single reservation larger than the budget less
// what stages keep for the run, which could never be satisfied.
type TooLargeError struct {
	Need, Limit int64
	// Kept is what stages hold of the budget for the whole run (Keep).
	Kept int64
}

// Error implements error.
func (e *TooLargeError) Error() string {
	room := e.Limit - e.Kept
	need := bytesize.Format(e.Need)
	if e.Need-room < room/100 { // within rounding: say by how much
		need = fmt.Sprintf("%s (%d bytes more)", need, e.Need-room)
	}
	// The figure is a floor: a budget that holds this sample alone may
	// still stall a pipeline holding several, which the stall then says.
	least := bytesize.FormatAtLeast(e.Need + e.Kept)
	if e.Kept > 0 {
		return fmt.Sprintf("a sample of %s exceeds the %s the memory budget of %s leaves samples (stages keep %s for their own use); raise resources.memory to at least %s, the least that holds it alone with what stages keep",
			need, bytesize.Format(room), bytesize.Format(e.Limit), bytesize.Format(e.Kept), least)
	}
	return fmt.Sprintf("a sample of %s exceeds the whole memory budget of %s; raise resources.memory to at least %s, the least that holds it alone", need, bytesize.Format(e.Limit), least)
}

// Keep reserves n bytes for the rest of the run (what a stage holds of
// its own, not samples), if they are free now and nobody waits; a sample
// larger than what is left then fails at once instead of waiting for
// memory that never frees. Unkeep gives them back.
func (b *Budget) Keep(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	b.mu.Lock()
	ok := b.used+n <= b.limit && b.mayPassLocked(lowest)
	if ok {
		b.add(n)
		b.kept += n // under the same lock: a sample asking meanwhile sees both or neither
	}
	b.mu.Unlock()
	if ok {
		b.fitSpare()
	}
	return ok
}

// Unkeep returns n bytes reserved by Keep.
func (b *Budget) Unkeep(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	b.kept -= n
	b.releaseLocked(n)
	b.mu.Unlock()
}

// New returns a budget of limit bytes.
func New(limit int64) *Budget { return &Budget{limit: limit} }

// Limit returns the budget's size.
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// Used returns the bytes currently reserved.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.cur.Load()
}

// Peak returns the most bytes ever reserved at once.
func (b *Budget) Peak() int64 {
	if b == nil {
		return 0
	}
	return b.peak.Load()
}

// Moves returns how many reservations and releases there have been.
func (b *Budget) Moves() uint64 {
	if b == nil {
		return 0
	}
	return b.moves.Load()
}

// Waiters names the holders waiting now, in the order they are served,
// with the bytes they ask for (and how many wait, where one holder waits
// several times over, as a read-ahead does); unnamed ones are left out.
func (b *Budget) Waiters() []string {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var order []string
	count := map[string]int{}
	bytes := map[string]int64{}
	for _, w := range b.served() {
		if w.who == "" {
			continue
		}
		if count[w.who] == 0 {
			order = append(order, w.who)
		}
		count[w.who]++
		bytes[w.who] += w.n
	}
	out := make([]string, len(order))
	for i, who := range order {
		if count[who] == 1 {
			out[i] = fmt.Sprintf("%s (%s)", who, bytesize.Format(bytes[who]))
		} else {
			out[i] = fmt.Sprintf("%s (%d waiting, %s)", who, count[who], bytesize.Format(bytes[who]))
		}
	}
	return out
}

// Waiting returns the number of reservations waiting and the bytes they ask for.
func (b *Budget) Waiting() (n int, bytes int64) {
	if b == nil {
		return 0, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, w := range b.waiters {
		bytes += w.n
	}
	return len(b.waiters), bytes
}

func (b *Budget) add(n int64) {
	b.moves.Add(1)
	b.used += n
	c := b.cur.Add(n)
	for {
		p := b.peak.Load()
		if c <= p || b.peak.CompareAndSwap(p, c) {
			return
		}
	}
}

// served returns the waiters in the order they are served.
func (b *Budget) served() []waiter {
	out := append([]waiter(nil), b.waiters...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].rank > out[j].rank })
	return out
}

// mayPassLocked reports whether a reservation at rank may be granted
// while others wait: only if they all rank below it.
func (b *Budget) mayPassLocked(rank int) bool {
	for _, w := range b.waiters {
		if w.rank >= rank {
			return false
		}
	}
	return true
}

// TryAcquire reserves n bytes if they are free now and nobody waits.
func (b *Budget) TryAcquire(n int64) bool { return b.TryAcquireAt(n, lowest) }

// TryAcquireAt reserves n bytes if they are free now and nobody of the
// same or a higher rank waits.
func (b *Budget) TryAcquireAt(n int64, rank int) bool {
	if b == nil || n <= 0 {
		return true
	}
	b.mu.Lock()
	if b.used+n <= b.limit && b.mayPassLocked(rank) {
		b.add(n)
		b.mu.Unlock()
		b.fitSpare()
		return true
	}
	b.mu.Unlock()
	return false
}

// Acquire reserves n bytes, waiting until they are free. Waiters are served
// in order, so a large sample is not starved by a stream of small ones.
func (b *Budget) Acquire(ctx context.Context, n int64) error { return b.AcquireAs(ctx, n, "") }

// AcquireAs is Acquire for a named holder (a stage), whom Waiters names
// while it waits.
func (b *Budget) AcquireAs(ctx context.Context, n int64, who string) error {
	return b.AcquireFor(ctx, n, Holder{Name: who, Rank: lowest})
}

// AcquireFor is Acquire for holder h: it is served by h.Rank (see Holder)
// and named by Waiters while it waits.
func (b *Budget) AcquireFor(ctx context.Context, n int64, h Holder) error {
	if b == nil || n <= 0 {
		return nil
	}
	b.mu.Lock()
	if n > b.limit-b.kept {
		b.mu.Unlock()
		return &TooLargeError{Need: n, Limit: b.limit, Kept: b.kept}
	}
	if b.used+n <= b.limit && b.mayPassLocked(h.Rank) {
		b.add(n)
		b.mu.Unlock()
		b.fitSpare()
		return nil
	}
	w := waiter{n: n, who: h.Name, rank: h.Rank, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		b.fitSpare()
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		select {
		case <-w.ready:
			// Granted while we were giving up: hand the bytes back.
			b.releaseLocked(n)
		default:
			for i := range b.waiters {
				if b.waiters[i].ready == w.ready {
					b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
					break
				}
			}
			b.notifyLocked()
		}
		return ctx.Err()
	}
}

// Release returns n bytes.
func (b *Budget) Release(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	b.releaseLocked(n)
	b.mu.Unlock()
}

func (b *Budget) releaseLocked(n int64) {
	b.add(-n)
	if b.used < 0 {
		panic(fmt.Sprintf("budget: released more than reserved (used %d)", b.used))
	}
	b.notifyLocked()
}

func (b *Budget) notifyLocked() {
	for len(b.waiters) > 0 {
		first := 0
		for i, w := range b.waiters {
			if w.rank > b.waiters[first].rank {
				first = i
			}
		}
		w := b.waiters[first]
		if b.used+w.n > b.limit {
			return
		}
		b.add(w.n)
		close(w.ready)
		b.waiters = append(b.waiters[:first], b.waiters[first+1:]...)
	}
}
