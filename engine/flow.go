package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"

	"github.com/piperun/piperun/budget"
	"github.com/piperun/piperun/sample"
)

// chunk is what travels on a channel between two stages: up to ChunkSize
// samples, or an end-of-epoch marker. Sending samples in chunks amortizes
// the channel and scheduler cost that would otherwise dominate cheap stages.
type chunk struct {
	samples []*sample.Sample
	eoe     bool
	epoch   int
	// bytes is what the samples hold for this consumer (each consumer of
	// a fan-out holds its share): what its queue counts while it waits.
	bytes int64
}

// link is one edge of the DAG: the data channel and a stop channel the
// consumer closes when it wants no more input (take reached its count).
type link struct {
	ch   chan *chunk
	stop chan struct{}
	// queued is the bytes held by the chunks in ch, so a stuck run can
	// say where its memory waits.
	queued atomic.Int64
}

func newLink(capacity int) *link {
	return &link{ch: make(chan *chunk, capacity), stop: make(chan struct{})}
}

// allStopped reports whether every consumer of links has stopped, so a
// stage can quit before doing work nobody will read.
func allStopped(links []*link) bool {
	if len(links) == 0 {
		return false
	}
	for _, l := range links {
		select {
		case <-l.stop:
		default:
			return false
		}
	}
	return true
}

// errDownstreamDone tells a producer that no consumer wants more samples.
var errDownstreamDone = errors.New("downstream done")

// outlet is a stage's output: it batches samples into chunks, reserves
// their memory and fans them out to every consumer.
type outlet struct {
	ctx     context.Context
	links   []*link
	dead    []bool
	live    int
	pending []*sample.Sample
	size    int
	// pendingBytes and maxBytes flush a chunk early when its samples are
	// large, so a chunk of 64 big batches never waits for the 64th.
	pendingBytes, maxBytes int64
	budget                 *budget.Budget
	onEmit                 func(n int, bytes int64)
	// holder is the stage, for the budget's order of service and its
	// list of waiters.
	holder budget.Holder
	// copies is how many consumers get each sample: its values are
	// reserved once and its field map that many times over when it is
	// emitted (see need), and each consumer's copy takes its share at
	// send. Reserving the copies at send instead could wait for memory
	// that only the consumers, who have not been sent anything, can free.
	copies int
}

func newOutlet(ctx context.Context, links []*link, size int, b *budget.Budget) *outlet {
	return &outlet{ctx: ctx, links: links, dead: make([]bool, len(links)), live: len(links), size: size, budget: b,
		maxBytes: chunkBytes(b.Limit()), copies: max(1, len(links))}
}

// chunkBytes is the most bytes of samples a chunk gathers before it is
// sent: a 64th of the budget, so that a chunk of big samples never waits
// for its 64th and a fan-out's clones of a chunk always fit beside it.
func chunkBytes(budget int64) int64 {
	if budget <= 0 {
		return math.MaxInt64
	}
	return max(1, budget/64)
}

// reserve makes s.Held match what s needs for all consumers, waiting for
// budget when it grows. Pending samples are flushed before waiting, so the
// consumers can free the memory we wait for.
func (o *outlet) reserve(s *sample.Sample) error {
	return reserve(o.ctx, o.budget, s, o.copies, o.holder, o.flush)
}

// reserve makes s.Held match need(s, copies), waiting for budget as stage
// who when it grows, after calling beforeWait.
func reserve(ctx context.Context, b *budget.Budget, s *sample.Sample, copies int, who budget.Holder, beforeWait func() error) error {
	n := need(b, s, copies)
	d := n - s.Held
	switch {
	case d > 0:
		if !b.TryAcquireAt(d, who.Rank) {
			if beforeWait != nil {
				if err := beforeWait(); err != nil {
					return err
				}
			}
			if err := b.AcquireFor(ctx, d, who); err != nil {
				// The stage's error names no sample for a run-wide
				// problem, but which file made a sample too large is
				// what a user looks for.
				var tl *budget.TooLargeError
				if errors.As(err, &tl) {
					return fmt.Errorf("%s: %w", s.Describe(), err)
				}
				return err
			}
		}
	case d < 0:
		b.Release(-d)
	}
	s.Held = n
	return nil
}

// need is what s must reserve on its own to be sent to copies consumers:
// its field values once, since the copies a fan-out makes share them, and
// a field map per copy. Values still covered by a Shared from a fan-out
// above are not counted again; a sample changed since that fan-out leaves
// its Shared first and counts all it holds.
func need(b *budget.Budget, s *sample.Sample, copies int) int64 {
	if s.Shared != nil && !s.Shared.Covers(s) {
		unshare(b, s)
	}
	over, vals := s.Sizes()
	if s.Shared != nil {
		return over*int64(copies) + s.Stands
	}
	return vals + s.Stands + over*int64(copies)
}

// unshare takes s out of its Shared; the last copy to leave releases it.
func unshare(b *budget.Budget, s *sample.Sample) {
	if s.Shared.Drop() {
		b.Release(s.Shared.Bytes)
	}
	s.Shared, s.SharedPart = nil, 0
}

// release gives back everything s holds of the budget.
func release(b *budget.Budget, s *sample.Sample) {
	b.Release(s.Held)
	s.Held = 0
	if s.Shared != nil {
		unshare(b, s)
	}
}

// hand moves what from holds of the budget to to. Bytes from shares with
// a fan-out's other consumers cannot move, as those still hold them: from
// leaves its Shared, as on release.
func hand(b *budget.Budget, to, from *sample.Sample) {
	to.Held += from.Held
	from.Held = 0
	if from.Shared != nil {
		unshare(b, from)
	}
}

// keep makes a copy of s that a stage keeps while s goes on (the
// in-memory cache): their values' bytes, which s reserved, become a Shared
// of the two, as a fan-out's copies share them, and the copy reserves
// only its own field map, if free. Reserved again, the cache's values
// were counted twice while a shuffle below held them (a review: a peak
// 115MiB above the process's RSS).
func keep(b *budget.Budget, s *sample.Sample, rank int) (*sample.Sample, bool) {
	own, vals := s.Sizes()
	if s.Shared != nil && !s.Shared.Covers(s) || s.Shared == nil && s.Held < vals {
		// Not what emit's reservation leaves (need): reserve it all.
		own += vals
		if !b.TryAcquireAt(own, rank) {
			return nil, false
		}
		c := s.Clone()
		c.Held = own
		return c, true
	}
	if !b.TryAcquireAt(own, rank) {
		return nil, false
	}
	part := int64(0)
	if s.Shared == nil {
		// The part is the kept copy's, for the accounts of who holds
		// what: it stays, the one passed on goes.
		s.Shared, part = sample.Share(s, 1), vals
		s.Held -= vals
	}
	s.Shared.AddRefs(1)
	c := s.Clone()
	c.Held, c.Shared, c.SharedPart = own, s.Shared, part
	return c, true
}

// copyKept is a copy of a kept sample, sharing its values' reservation:
// emit reserves only its field map.
func copyKept(s *sample.Sample) *sample.Sample {
	c := s.Clone()
	if s.Shared != nil {
		s.Shared.AddRefs(1)
		c.Shared = s.Shared
	}
	return c
}

// shrink gives back n of the bytes s holds, no more than it holds. A
// sample in a fan-out's Shared keeps what it holds: its values are the
// Shared's, which the other copies still hold.
func shrink(b *budget.Budget, s *sample.Sample, n int64) {
	if s.Shared != nil || n <= 0 {
		return
	}
	n = min(n, s.Held)
	s.Held -= n
	b.Release(n)
}

// emit queues s for the consumers. It owns s from the call on: what s
// held is released if it cannot be queued.
func (o *outlet) emit(s *sample.Sample) error {
	if o.live == 0 {
		release(o.budget, s)
		return errDownstreamDone
	}
	if err := o.reserve(s); err != nil {
		release(o.budget, s)
		return err
	}
	o.pending = append(o.pending, s)
	o.pendingBytes += s.Charge()
	if len(o.pending) >= o.size || o.pendingBytes >= o.maxBytes {
		return o.flush()
	}
	return nil
}

// flush sends the pending samples. A consumer that closed its stop channel
// is dropped, and its share of the samples released.
func (o *outlet) flush() error {
	if len(o.pending) == 0 {
		return nil
	}
	batch := o.pending
	o.pending = make([]*sample.Sample, 0, o.size)
	o.pendingBytes = 0
	n := len(batch)
	bytes, delivered, err := o.send(&chunk{samples: batch})
	// Count what a consumer took: a chunk every consumer refused was not
	// emitted.
	if delivered && o.onEmit != nil {
		o.onEmit(n, bytes)
	}
	return err
}

// yieldBytes is the size of a sent chunk after which the sender yields its
// processor. A woken receiver waits in the sender's run queue until the
// sender blocks, and with every other processor busy in a cgo decode it
// can wait milliseconds: a stage emitting big samples (a batch turning a
// drained shuffle into 19 MiB float batches) would fill its queue before
// the consumer frees one, and how full the queues got decided W1's peak
// memory, run to run. Yielding hands each big chunk over at once.
const yieldBytes = 1 << 20

// send hands c to every live consumer and returns the bytes one
// consumer's copy of it accounts for.
func (o *outlet) send(c *chunk) (bytes int64, delivered bool, err error) {
	// Drop consumers that have stopped: they must not be sent more, even
	// when their queue has room and select would pick the send.
	var live []int
	for i, l := range o.links {
		if o.dead[i] {
			continue
		}
		select {
		case <-l.stop:
			o.dead[i] = true
			o.live--
			continue
		default:
		}
		live = append(live, i)
	}
	// Each consumer owns its samples' field maps (values are shared), so
	// every extra consumer gets clones, made before any consumer can touch
	// the originals. The values' bytes, reserved once, become a Shared that
	// the last copy releases; each copy keeps one field map's share of what
	// emit reserved, and the shares of consumers that stopped are returned.
	outs := make([]*chunk, len(live))
	for k := range live {
		if k == 0 || c.eoe {
			outs[k] = c
			continue
		}
		outs[k] = &chunk{samples: make([]*sample.Sample, len(c.samples))}
	}
	if !c.eoe && o.copies > 1 && len(live) > 0 {
		n := int64(len(live))
		for j, s := range c.samples {
			var vals int64
			if s.Shared == nil {
				vals = s.ValueBytes()
			}
			over := (s.Held - vals) / int64(o.copies)
			o.budget.Release(s.Held - vals - over*n)
			s.Held = over + vals
			if n == 1 {
				continue
			}
			if s.Shared == nil {
				s.Shared, s.SharedPart = sample.Share(s, int(n)), vals
				s.Held = over
			} else {
				s.Shared.AddRefs(int(n) - 1)
			}
			part := s.SharedPart / n
			s.SharedPart -= part * (n - 1)
			for k := 1; k < len(live); k++ {
				cl := s.Clone()
				cl.Held, cl.Shared, cl.SharedPart = over, s.Shared, part
				outs[k].samples[j] = cl
			}
		}
	}
	if !c.eoe {
		for _, oc := range outs {
			oc.bytes = 0
			for _, s := range oc.samples {
				oc.bytes += s.Charge()
			}
		}
	}
	if len(outs) > 0 && !c.eoe {
		for _, s := range outs[0].samples { // before the consumers own them
			bytes += s.Size()
		}
	}
	for k, i := range live {
		l := o.links[i]
		// Count before the send: the consumer may take the chunk and
		// subtract its bytes before this goroutine runs again. (So a
		// chunk whose sender waits on a full queue counts as queued.)
		l.queued.Add(outs[k].bytes)
		select {
		case l.ch <- outs[k]:
			delivered = true
		case <-l.stop:
			l.queued.Add(-outs[k].bytes)
			o.dead[i] = true
			o.live--
			if !c.eoe {
				releaseAll(o.budget, outs[k].samples)
			}
		case <-o.ctx.Done():
			l.queued.Add(-outs[k].bytes)
			return bytes, delivered, o.ctx.Err()
		}
	}
	if len(live) == 0 && !c.eoe {
		releaseAll(o.budget, c.samples)
	}
	if delivered && bytes >= yieldBytes {
		runtime.Gosched()
	}
	if o.live == 0 {
		return bytes, delivered, errDownstreamDone
	}
	return bytes, delivered, nil
}

func (o *outlet) endEpoch(epoch int) error {
	if err := o.flush(); err != nil {
		return err
	}
	if o.live == 0 {
		return errDownstreamDone
	}
	_, _, err := o.send(&chunk{eoe: true, epoch: epoch})
	return err
}

// close ends the outlet's streams; samples still pending, which a stage
// leaves when its consumers stopped or the run failed, give their memory back.
func (o *outlet) close() {
	releaseAll(o.budget, o.pending)
	o.pending = nil
	for _, l := range o.links {
		close(l.ch)
	}
}

func releaseAll(b *budget.Budget, ss []*sample.Sample) {
	for _, s := range ss {
		release(b, s)
	}
}

// inlet is one input of a stage.
type inlet struct {
	ctx  context.Context
	l    *link
	cur  []*sample.Sample
	idle func() error
	// prefetch, if set, sees each chunk as it arrives (stages.Prefetcher).
	prefetch func([]*sample.Sample)
	// closed is set once the producer has closed the channel.
	closed bool
	// stopped is set once this inlet told its producer to stop.
	stopped bool
}

// item is what an inlet yields: a sample, an end-of-epoch marker, or the end.
type item struct {
	s     *sample.Sample
	eoe   bool
	epoch int
	end   bool
}

// next returns the next item. Before blocking on an empty channel it calls
// idle, which flushes the stage's own partial output so that a slow
// producer never leaves finished samples waiting downstream.
func (in *inlet) next() (item, error) {
	for len(in.cur) == 0 {
		if in.closed {
			if err := in.ctx.Err(); err != nil {
				return item{}, err
			}
			return item{end: true}, nil
		}
		var c *chunk
		var ok bool
		select {
		case c, ok = <-in.l.ch:
		default:
			if in.idle != nil {
				if err := in.idle(); err != nil {
					return item{}, err
				}
			}
			select {
			case c, ok = <-in.l.ch:
			case <-in.ctx.Done():
				return item{}, in.ctx.Err()
			}
		}
		if !ok {
			in.closed = true
			// A stage that fails cancels the run before it closes its
			// output (finish): a close seen in a cancelled run is that
			// failure, not the end of the data, which a batch would answer
			// by emitting its partial batch.
			if err := in.ctx.Err(); err != nil {
				return item{}, err
			}
			return item{end: true}, nil
		}
		in.l.queued.Add(-c.bytes)
		if c.eoe {
			return item{eoe: true, epoch: c.epoch}, nil
		}
		in.cur = c.samples
		if in.prefetch != nil {
			in.prefetch(c.samples)
		}
	}
	s := in.cur[0]
	in.cur[0] = nil
	in.cur = in.cur[1:]
	return item{s: s}, nil
}

// nextChunk returns the rest of the current chunk, or the next one.
func (in *inlet) nextChunk() ([]*sample.Sample, item, error) {
	if len(in.cur) > 0 {
		c := in.cur
		in.cur = nil
		return c, item{}, nil
	}
	it, err := in.next()
	if err != nil || it.s == nil {
		return nil, it, err
	}
	c := append([]*sample.Sample{it.s}, in.cur...)
	in.cur = nil
	return c, item{}, nil
}

// stop tells the producer this input wants nothing more, and releases what
// is queued.
func (in *inlet) stop(b *budget.Budget) {
	if !in.stopped {
		in.stopped = true
		close(in.l.stop)
	}
	releaseAll(b, in.cur)
	in.cur = nil
	for {
		select {
		case c, ok := <-in.l.ch:
			if !ok {
				in.closed = true
				return
			}
			in.l.queued.Add(-c.bytes)
			releaseAll(b, c.samples)
		default:
			return
		}
	}
}
