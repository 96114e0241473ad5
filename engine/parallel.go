package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/stages"
)

// job is a slice of one input chunk processed by one worker, or an
// end-of-epoch marker that keeps its place in the order.
type job struct {
	in    []*sample.Sample
	out   []*sample.Sample
	err   error
	eoe   bool
	epoch int
	done  chan struct{}
	// head is closed when the collector waits for this job. Only the head
	// job may wait for memory: a later job waiting could hold the budget
	// the head needs while the collector cannot emit past the head.
	head chan struct{}
	// early is the bytes this job reserved before it was the head, counted
	// in its window's held bytes until the collector emits it.
	early int64
	// queued is the bytes its finished output holds, counted in its
	// window's queued bytes until the collector takes it.
	queued int64
}

// partial is the finished part of a job's output, handed to the collector
// by a worker about to wait for memory: a job of many large samples could
// otherwise hold, undelivered, the memory its own next sample needs.
type partial struct {
	out   []*sample.Sample
	early int64
}

func newJob() *job { return &job{done: make(chan struct{}), head: make(chan struct{})} }

// window bounds the samples a parallel stage has taken in but not yet
// emitted, so that work in flight never holds more than a quarter of what
// the memory budget leaves samples (plan.SampleRoom; "the budget" below).
// Without the bound, finished later jobs could hold all the
// memory the job at the head of the order needs; and a worker makes its
// output before the budget is asked for it, so the outputs being made are
// outside the budget until then: 16 workers making 48 MiB images each held
// 968 MiB of RSS under a 128 MiB budget (found by a memory audit). So the
// limit follows the bytes an input turns into, down to one sample at a
// time, whatever the parallelism.
type window struct {
	mu       sync.Mutex
	cond     *sync.Cond
	inflight int
	limit    int
	ceil     int
	budget   int64
	// outBytes and ins give the average output bytes of an input, measured
	// as jobs finish; the limit follows it.
	outBytes, ins int64
	closed        bool
	// held is the bytes reserved by jobs that were not the head when they
	// reserved, and not yet emitted, by this stage and every other
	// parallel stage of the run: a quarter each, two maps feeding two
	// shuffles held the whole budget with the shuffles' half, and the run
	// stalled (a memory audit). The sample count above follows an average
	// that lags when outputs grow (small images, then large); this bound
	// does not.
	held *atomic.Int64
	// queued is the bytes held by finished jobs the collector has not
	// taken yet: outputs of any size, reserved by this stage or above it.
	// While the stage below is slow, they are what piles up.
	queued atomic.Int64
}

// newWindow makes the window of a stage of workers, at most max samples,
// under budget (0: none), whose output sample the plan estimates at est
// bytes (-1: unknown), counting what jobs reserve ahead of the head in
// early with the run's other parallel stages. Until a job has finished,
// the plan's estimate sets the limit; without one, a single sample goes
// first and is measured: one worker per sample could hold many times the
// budget before anything was known of output sizes.
func newWindow(workers, max int, budget, est int64, early *atomic.Int64) *window {
	if early == nil {
		early = new(atomic.Int64)
	}
	w := &window{limit: workers, ceil: max, budget: budget, held: early}
	switch {
	case budget > 0 && est > 0:
		w.limit = min(workers, w.fit(est))
	case budget > 0:
		w.limit = 1
	}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// fit is the limit for inputs of avg output bytes each: a quarter of the
// budget, at least one and at most the ceiling.
func (w *window) fit(avg int64) int {
	return int(max(1, min(int64(w.ceil), w.budget/4/max(1, avg))))
}

// take waits until k more samples fit in the window, and finished jobs
// waiting for the collector hold no more than a quarter of the budget.
func (w *window) take(k int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for !w.closed && w.inflight > 0 && (w.inflight+k > w.limit || w.budget > 0 && w.queued.Load() > w.budget/4) {
		w.cond.Wait()
	}
	w.inflight += k
	return !w.closed
}

// done returns k inputs whose outputs held bytes in all.
func (w *window) done(k int, bytes int64) {
	w.mu.Lock()
	w.inflight -= k
	w.outBytes += bytes
	w.ins += int64(k)
	if w.ins > 0 && w.budget > 0 {
		w.limit = w.fit(w.outBytes / w.ins)
	}
	w.mu.Unlock()
	w.cond.Broadcast()
}

// holdEarly counts n more bytes reserved ahead of the head, if they fit
// in a quarter of the budget with what the run's other parallel stages
// reserved so.
func (w *window) holdEarly(n int64) bool {
	if w.held.Add(n) > w.budget/4 && w.budget > 0 {
		w.held.Add(-n)
		return false
	}
	return true
}

// jobCap is the largest job that lets every worker have one within the
// window.
func (w *window) jobCap(workers int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return max(1, w.limit/workers)
}

func (w *window) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.cond.Broadcast()
}

// jobSize splits chunks so that every worker gets work even when chunks
// are short, without making jobs so small that their overhead shows.
func jobSize(chunkSize, workers int) int {
	return max(1, chunkSize/(2*workers))
}

// jobWork is the time one job should take. A job costs a few microseconds
// of its own (channel operations, a wake-up), a percent of this; and where
// samples are slow (a photo's decode takes 1.7 ms) a job of jobSize of them
// keeps one worker busy for tens of milliseconds at the end of the data
// while the others have nothing left to take.
const jobWork = 250 * time.Microsecond

// aheadPerWorker is how many jobs a worker may finish ahead of the
// collector. While the stage below is busy for a moment (W1's batch
// writing its first 19 MB of floats into fresh memory: 15 ms, 16 photos'
// decoding on two cores), two a worker ran both of W1's decoders dry for
// 6 ms (bench/RESULTS.md, run AE). More would only let a stage that is
// faster than the one below hold more memory for nothing: a slow trainer
// would find a quarter of the budget queued here.
const aheadPerWorker = 8

// jobCost follows a parallel stage's time per sample, so the dispatcher
// can size jobs to about jobWork.
type jobCost struct {
	ns atomic.Int64 // per sample, moving average; 0 until a job is timed
}

// observe adds a job of n samples that took d. Two workers may update at
// once and one update be lost, which a moving average shrugs off. A job
// that waited for memory counts its wait: its stage then gets shorter
// jobs, which cost a little more each but never hold more back.
func (c *jobCost) observe(d time.Duration, n int) {
	if n <= 0 {
		return
	}
	per := int64(d) / int64(n)
	if old := c.ns.Load(); old > 0 {
		per = (3*old + per) / 4
	}
	c.ns.Store(max(1, per))
}

// size is how many samples make a job of about jobWork, at most most. Until
// a job has been timed it is one, so a slow stage's first jobs are short
// too; a fast stage's grow after its first.
func (c *jobCost) size(most int) int {
	ns := c.ns.Load()
	if ns <= 0 {
		return 1
	}
	return int(max(1, min(int64(most), int64(jobWork)/ns)))
}

// parallelRun is one run of a parallel stage: a dispatcher cuts the input
// into jobs, workers process them, and the collector (the stage's own
// goroutine) emits their outputs, in input order when the spec is
// deterministic (a bounded window of jobs in flight), otherwise in
// completion order.
type parallelRun struct {
	r *Run
	n *node
	p stages.Processor
	o *outlet
	// ctx is the run's; lctx is cancelled whenever the collector stops.
	ctx, lctx context.Context
	det       bool
	workers   int
	// results holds aheadPerWorker jobs a worker, so that while the stage
	// below is busy for a moment the workers go on with the jobs behind
	// (see aheadPerWorker); the window and its queued bytes bound what
	// those jobs hold.
	jobs     chan *job
	results  chan *job
	partials chan partial
	inflight sync.WaitGroup // jobs with a worker, in completion order
	cost     jobCost
	win      *window
	// held is taken from results, its output not yet handed to emitOut.
	held *job
}

// runParallel runs a concurrency-safe processor on n workers.
func (r *Run) runParallel(ctx context.Context, g *errgroup.Group, n *node, p stages.Processor) (err error) {
	workers := n.pn.Parallelism
	o := r.newOutlet(ctx, n)
	// On a failure the run is cancelled before the outlet closes, or the
	// stages below would take the close for the end of the data (a batch
	// would emit its partial batch to a trainer).
	defer r.end(n, o, &err)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	most := 4 * workers * r.plan.ChunkSize
	pr := &parallelRun{
		r: r, n: n, p: p, o: o, ctx: ctx, lctx: lctx, det: r.plan.Spec.Deterministic, workers: workers,
		jobs:     make(chan *job, workers),
		results:  make(chan *job, min(most, aheadPerWorker*workers)),
		partials: make(chan partial),
		win:      newWindow(workers, most, r.room, n.pn.SampleBytes, &r.early),
	}
	defer pr.win.close()
	stop := context.AfterFunc(lctx, pr.win.close)
	defer stop()
	defer pr.drain(cancel)
	for range workers {
		g.Go(pr.work)
	}
	g.Go(func() error { return pr.dispatch(g) })
	return pr.collect()
}

// drain runs however the collector ends: the jobs it did not emit give
// back their memory. It stops the workers and the dispatcher, then drains
// every job queued behind the collector, each once its worker is done
// with it.
func (pr *parallelRun) drain(cancel context.CancelFunc) {
	cancel()
	// The window's count of early holds is the run's, shared with its
	// other parallel stages: what these jobs held early is given back
	// there too, or their workers would wait their turn for the rest of
	// the run.
	if j := pr.held; j != nil {
		<-j.done
		releaseAll(pr.r.budget, j.out)
		pr.win.held.Add(-j.early)
	}
	for j := range pr.results {
		<-j.done
		releaseAll(pr.r.budget, j.out)
		pr.win.held.Add(-j.early)
		j.out, j.early = nil, 0
	}
}

// work is one worker: it processes jobs until the dispatcher closes them.
func (pr *parallelRun) work() error {
	var worked time.Duration // since this worker last yielded
	slot := &cpuSlot{pool: pr.r.cpu}
	for j := range pr.jobs {
		slot.take(pr.lctx)
		t0 := time.Now()
		pr.r.workSafe(pr.lctx, pr.n, pr.p, j, pr.win, pr.partials, slot)
		d := time.Since(t0)
		slot.give()
		pr.cost.observe(d, len(j.in))
		for _, s := range j.out {
			j.queued += s.Retained()
		}
		pr.win.queued.Add(j.queued)
		// See yieldEvery. The yield comes before the hand-off below, which
		// wakes the collector onto this thread's run queue: yielding after
		// it, the collector ran first and a spare thread took the worker
		// to the other core, 8 % slower on W1.
		if worked += d; worked >= yieldEvery {
			runtime.Gosched()
			worked = 0
		}
		if !pr.det {
			select {
			case pr.results <- j:
			case <-pr.lctx.Done():
				releaseAll(pr.r.budget, j.out)
				pr.win.held.Add(-j.early) // 0: every job is the head here
				j.out, j.early = nil, 0
			}
			pr.inflight.Done()
		}
		close(j.done)
	}
	return nil
}

// dispatch owns the inlet: it cuts the input into jobs for the workers,
// and stops when the collector cancels.
func (pr *parallelRun) dispatch(g *errgroup.Group) error {
	r, n := pr.r, pr.n
	in := r.newInlet(pr.lctx, n.ins[0], nil)
	if pf, ok := pr.p.(stages.Prefetcher); ok {
		var stop func()
		in.prefetch, stop = r.startPrefetch(pr.lctx, g, n, pf)
		defer stop()
	}
	defer func() {
		close(pr.jobs)
		if !pr.det {
			pr.inflight.Wait()
		}
		close(pr.results)
		// Drain under the run's context: lctx is cancelled whenever the
		// collector stops, and what is queued must still be released.
		in.ctx = pr.ctx
		r.finish(nil, nil, in)
	}()
	size := jobSize(r.plan.ChunkSize, pr.workers)
	for {
		batch, it, err := in.nextChunk()
		if err != nil || it.end {
			return nil // the collector reports errors; a cancel is its doing
		}
		if it.eoe {
			j := newJob()
			j.eoe, j.epoch = true, it.epoch
			if !pr.send(j) {
				return nil
			}
			continue
		}
		if allStopped(n.outs) {
			releaseAll(r.budget, batch)
			return nil
		}
		n.in.Add(int64(len(batch)))
		for len(batch) > 0 {
			k := min(pr.cost.size(size), len(batch), pr.win.jobCap(pr.workers))
			if !pr.win.take(k) {
				releaseAll(r.budget, batch)
				return nil
			}
			j := newJob()
			j.in = batch[:k:k]
			if !pr.det {
				close(j.head) // completion order: nobody waits behind it
			}
			if !pr.send(j) {
				releaseAll(r.budget, batch[k:])
				return nil
			}
			batch = batch[k:]
		}
	}
}

// send queues job j: for the collector in input order (deterministic),
// and for a worker unless it marks an epoch's end; false once the
// collector has stopped.
func (pr *parallelRun) send(j *job) bool {
	if pr.det {
		select {
		case pr.results <- j:
		case <-pr.lctx.Done():
			releaseAll(pr.r.budget, j.in)
			return false
		}
	}
	if j.eoe {
		if !pr.det {
			pr.inflight.Wait()
			select {
			case pr.results <- j:
			case <-pr.lctx.Done():
				return false
			}
		}
		close(j.done)
		return true
	}
	if !pr.det {
		pr.inflight.Add(1)
	}
	select {
	case pr.jobs <- j:
		return true
	case <-pr.lctx.Done():
		if !pr.det {
			pr.inflight.Done()
		}
		releaseAll(pr.r.budget, j.in)
		close(j.done) // queued in results (det), never worked
		return false
	}
}

// collect emits the jobs' outputs as they come from results, and what
// workers hand over before they wait for memory.
func (pr *parallelRun) collect() error {
	o := pr.o
	for {
		var j *job
		var ok bool
		select {
		case j, ok = <-pr.results:
		case pt := <-pr.partials:
			if err := pr.takePartial(pt); err != nil {
				return err
			}
			continue
		default:
			if err := o.flush(); err != nil {
				return err
			}
			select {
			case j, ok = <-pr.results:
			case pt := <-pr.partials:
				if err := pr.takePartial(pt); err != nil {
					return err
				}
				continue
			case <-pr.ctx.Done():
				return pr.ctx.Err()
			}
		}
		if !ok {
			if pr.ctx.Err() != nil {
				return pr.ctx.Err()
			}
			return o.flush()
		}
		pr.held = j
		select {
		case <-j.done:
		default:
			// Flush before waiting so downstream can free what the job may
			// be waiting for, then let the job wait for memory.
			if err := o.flush(); err != nil {
				return err
			}
			if pr.det {
				close(j.head)
			}
			for waiting := true; waiting; {
				select {
				case <-j.done:
					waiting = false
				case pt := <-pr.partials:
					if err := pr.takePartial(pt); err != nil {
						return err
					}
				case <-pr.ctx.Done():
					return pr.ctx.Err()
				}
			}
		}
		pr.held = nil // emitOut owns the output, and a failed job released its own
		pr.win.queued.Add(-j.queued)
		if j.err != nil {
			return j.err
		}
		if j.eoe {
			if err := o.endEpoch(j.epoch); err != nil {
				return err
			}
			continue
		}
		if err := pr.emitOut(j.out, j.early, len(j.in)); err != nil {
			return err
		}
	}
}

// emitOut emits a job's output, whole or in part; in is the number of
// inputs it finishes.
func (pr *parallelRun) emitOut(out []*sample.Sample, early int64, in int) error {
	var held int64
	for _, s := range out {
		held += s.Retained()
	}
	pr.win.held.Add(-early)
	pr.win.done(in, held)
	for i, s := range out {
		if err := pr.o.emit(s); err != nil {
			releaseAll(pr.r.budget, out[i+1:])
			return err
		}
	}
	return nil
}

// takePartial emits what a worker handed over before waiting for memory,
// and flushes it so that downstream can free that memory.
func (pr *parallelRun) takePartial(pt partial) error {
	if err := pr.emitOut(pt.out, pt.early, 0); err != nil {
		return err
	}
	return pr.o.flush()
}

// workSafe is work with a panic in the stage made the job's error, so the
// job still reaches the collector, which fails the run with it: a panic
// that ended the worker would leave the job unfinished, and the collector
// and the dispatcher waiting for it forever.
func (r *Run) workSafe(ctx context.Context, n *node, p stages.Processor, j *job, win *window, partials chan<- partial, slot *cpuSlot) {
	defer func() {
		if rec := recover(); rec != nil {
			j.err = panicError(n, rec)
			releaseAll(r.budget, j.out)
			j.out = nil
			win.held.Add(-j.early)
			j.early = 0
		}
	}()
	r.work(ctx, n, p, j, win, partials, slot)
}

// work processes one job's samples, applying on_error to each. The
// worker holds slot while it computes, not while it waits.
func (r *Run) work(ctx context.Context, n *node, p stages.Processor, j *job, win *window, partials chan<- partial, slot *cpuSlot) {
	copies := max(1, len(n.outs)) // as the stage's outlet reserves
	var cur *sample.Sample
	passed := false
	waitHead := func() error {
		select {
		case <-j.head:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// beforeWait runs when the job must wait for memory: as the head (the
	// collector is waiting for it), it hands over what it has finished.
	beforeWait := func() error {
		slot.give()
		if err := waitHead(); err != nil {
			return err
		}
		if len(j.out) == 0 {
			return nil
		}
		pt := partial{out: j.out, early: j.early}
		j.out, j.early = nil, 0
		select {
		case partials <- pt:
			return nil
		case <-ctx.Done():
			releaseAll(r.budget, pt.out)
			win.held.Add(-pt.early)
			return ctx.Err()
		}
	}
	var waited time.Duration // in emit, for Options.Profile
	// emit owns s from the call on, as an outlet's does: s is released
	// if it cannot be kept for the collector.
	emit := func(s *sample.Sample) (err error) {
		if s == cur {
			passed = true
		}
		defer func() {
			if err != nil {
				release(r.budget, s)
			}
		}()
		if r.opts.Profile {
			t0 := time.Now()
			defer func() { waited += time.Since(t0) }()
		}
		// Given where it waits, below; taken back inside the wait's time.
		defer slot.take(ctx)
		select {
		case <-j.head:
		default:
			// Not the head: take memory only while it is free and the
			// window's early holds stay within their quarter; else wait
			// to be the head, when the collector has emitted what is before.
			if d := need(r.budget, s, copies) - s.Held; d > 0 {
				if win.holdEarly(d) {
					if r.budget.TryAcquireAt(d, n.holder.Rank) {
						j.early += d
						s.Held += d
						j.out = append(j.out, s)
						return nil
					}
					win.held.Add(-d)
				}
				slot.give()
				if err := waitHead(); err != nil {
					return err
				}
			}
		}
		if err := reserve(ctx, r.budget, s, copies, n.holder, beforeWait); err != nil {
			return err
		}
		j.out = append(j.out, s)
		return nil
	}
	// abandon ends the job with err, releasing what it holds and rest.
	abandon := func(err error, rest []*sample.Sample) {
		j.err = err
		releaseAll(r.budget, rest)
		releaseAll(r.budget, j.out)
		j.out = nil
		win.held.Add(-j.early)
		j.early = 0
	}
	for i, s := range j.in {
		if err := ctx.Err(); err != nil {
			// Stopped: a worker whose job is not the collector's next
			// would go on through it (a Ctrl-C during 2 s decodes took
			// 6 s to act).
			abandon(err, j.in[i:])
			return
		}
		cur, passed = s, false
		t0 := r.clock()
		err := p.Process(ctx, s, emit)
		n.busyFrom(t0, waited)
		waited = 0
		if !passed {
			release(r.budget, s)
		}
		if err := n.handle(s, err); err != nil {
			abandon(err, j.in[i+1:])
			return
		}
	}
}

// slot is one position of an interleave cycle.
type slot struct {
	stream stages.Stream
	origin *sample.Sample
	// items is fed by a read-ahead goroutine when the stage is parallel.
	items  chan streamItem
	cancel context.CancelFunc
	// wanted is poked when the consumer blocks on this slot; a read-ahead
	// goroutine short of memory waits for it, so only the stream being
	// consumed can wait for the budget.
	wanted chan struct{}
	// held is the bytes read ahead and not yet consumed.
	held atomic.Int64
}

type streamItem struct {
	s   *sample.Sample
	err error
}

// readAhead is how many samples each open stream reads ahead when parallel.
const readAhead = 16

// runExpand interleaves the streams an expander opens for its inputs, like
// tf.data's interleave: cycleLength streams open at once, blockLength
// samples from each in turn, an exhausted stream replaced by the next input
// in its place. The order is fixed by the inputs, whatever the parallelism;
// with parallelism > 1 each open stream is read ahead by its own goroutine.
func (r *Run) runExpand(ctx context.Context, g *errgroup.Group, n *node, x stages.Expander) (err error) {
	o := r.newOutlet(ctx, n)
	in := r.newInlet(ctx, n.ins[0], o)
	defer r.end(n, o, &err, in)
	cycle, block := x.Interleave()
	cycle, block = max(1, cycle), max(1, block)
	par := n.pn.Parallelism
	slots := make([]*slot, cycle)
	defer func() {
		for _, sl := range slots {
			r.closeSlot(sl)
		}
	}()

	for {
		epoch, ended := -1, false
		var id int64
		// open fills slot i with the next input's stream, or leaves it
		// nil when the inputs for this epoch are exhausted.
		open := func(i int) error {
			for epoch < 0 && !ended {
				it, err := in.next()
				if err != nil {
					return err
				}
				switch {
				case it.end:
					ended = true
				case it.eoe:
					epoch = it.epoch
				default:
					n.in.Add(1)
					st, err := x.Open(ctx, it.s)
					if err != nil {
						release(r.budget, it.s)
						if herr := n.handle(it.s, err); herr != nil {
							return herr
						}
						continue
					}
					sl := &slot{stream: st, origin: it.s}
					if par > 1 {
						r.startReadAhead(ctx, g, sl, cycle, o.copies, n)
					}
					slots[i] = sl
					return nil
				}
			}
			return nil
		}
		for i := range slots {
			if err := open(i); err != nil {
				return err
			}
		}
		for i := 0; ; i = (i + 1) % cycle {
			if allNil(slots) {
				break
			}
			sl := slots[i]
			if sl == nil {
				continue
			}
			for k := 0; k < block; k++ {
				s, err := r.nextFromSlot(ctx, n, sl, o.flush)
				if err == nil {
					s.ID, s.Epoch = id, sl.origin.Epoch
					id++
					if err := o.emit(s); err != nil {
						return n.fail(s, err) // names the stage of a sample too large for the budget
					}
					continue
				}
				if err != io.EOF {
					if stages.IsItemError(err) {
						if herr := n.handle(nil, n.inEpoch(sl.origin.Epoch, err)); herr != nil {
							return herr
						}
						k--
						continue // one bad item; the stream reads on
					}
					// Any other error ends the stream (a TFRecord cut short
					// or undecompressible), so the rest of it is lost; say
					// so. A bad TFRecord header under skip is an ItemError:
					// the reader scans to the next valid record and its
					// message says how many bytes that cost.
					if herr := n.handle(nil, n.inEpoch(sl.origin.Epoch, fmt.Errorf("%w; the rest of %s was not read", err, sl.origin.Describe()))); herr != nil {
						return herr
					}
				}
				r.closeSlot(sl)
				slots[i] = nil
				if err := open(i); err != nil {
					return err
				}
				break
			}
		}
		// Read up to the epoch marker even if the cycle emptied early.
		if err := open(0); err != nil {
			return err
		}
		if slots[0] != nil {
			return fmt.Errorf("internal: interleave reopened after its epoch")
		}
		if ended && epoch < 0 {
			return o.flush()
		}
		if err := o.endEpoch(epoch); err != nil {
			return err
		}
	}
}

func allNil(slots []*slot) bool {
	for _, s := range slots {
		if s != nil {
			return false
		}
	}
	return true
}

func (r *Run) startReadAhead(ctx context.Context, g *errgroup.Group, sl *slot, cycle, copies int, n *node) {
	who := n.holder
	// Streams read ahead at most a quarter of the budget between them, so
	// the stream being consumed always finds memory.
	limit := r.room / 4 / int64(max(1, cycle))
	sctx, cancel := context.WithCancel(ctx)
	sl.cancel = cancel
	sl.items = make(chan streamItem, readAhead)
	sl.wanted = make(chan struct{}, 1)
	waitWanted := func() error {
		select {
		case <-sl.wanted:
			return nil
		case <-sctx.Done():
			return sctx.Err()
		}
	}
	g.Go(func() (err error) {
		defer close(sl.items)
		// A panic in a stream fails the run naming the stage, as one in
		// any stage's own goroutine does, instead of ending the process.
		defer func() {
			if p := recover(); p != nil {
				err = r.failPanic(n, p)
			}
		}()
		// wanted is set once the consumer has asked for an item this
		// goroutine has not sent yet: from then on it may wait for the
		// budget without waiting for another ask, which would never come.
		wanted := false
		await := func() error {
			if wanted {
				return nil
			}
			if err := waitWanted(); err != nil {
				return err
			}
			wanted = true
			return nil
		}
		for {
			if sl.held.Load() > limit && await() != nil {
				return nil
			}
			t0 := r.clock()
			s, err := sl.stream.Next()
			n.busyFrom(t0, 0)
			if err == nil {
				if rerr := reserve(sctx, r.budget, s, copies, who, await); rerr != nil {
					if sctx.Err() != nil {
						return nil // cancelled: the consumer has gone
					}
					// A record larger than the whole budget: the consumer
					// must fail the run, not take the stream for ended.
					release(r.budget, s)
					s, err = nil, rerr
				}
			}
			if s != nil {
				sl.held.Add(s.Retained())
			}
			select {
			case sl.items <- streamItem{s, err}:
				wanted = false
			case <-sctx.Done():
				if s != nil {
					release(r.budget, s)
				}
				return nil
			}
			// A bad item (a JSON line) spoils only itself: read on, as
			// the consumer does without read-ahead.
			if err != nil && !stages.IsItemError(err) {
				return nil
			}
		}
	})
}

func (r *Run) nextFromSlot(ctx context.Context, n *node, sl *slot, flush func() error) (*sample.Sample, error) {
	if sl.items == nil {
		t0 := r.clock()
		defer n.busyFrom(t0, 0)
		return sl.stream.Next()
	}
	var it streamItem
	var ok bool
	select {
	case it, ok = <-sl.items:
	default:
		if err := flush(); err != nil {
			return nil, err
		}
		select {
		case sl.wanted <- struct{}{}:
		default:
		}
		select {
		case it, ok = <-sl.items:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if !ok {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	if it.s != nil {
		sl.held.Add(-it.s.Retained())
	}
	return it.s, it.err
}

func (r *Run) closeSlot(sl *slot) {
	if sl == nil {
		return
	}
	if sl.cancel != nil {
		sl.cancel()
		for it := range sl.items {
			if it.s != nil {
				release(r.budget, it.s)
			}
		}
	}
	sl.stream.Close()
	if sl.origin != nil {
		release(r.budget, sl.origin)
		sl.origin = nil
	}
}

// runJoin runs a joiner epoch by epoch. Samples it pulls and does not pass
// on (zip merges them) are released once it emits or finishes.
func (r *Run) runJoin(ctx context.Context, n *node, j stages.Joiner) (err error) {
	o := r.newOutlet(ctx, n)
	ins := make([]*inlet, len(n.ins))
	for i, l := range n.ins {
		ins[i] = r.newInlet(ctx, l, o)
	}
	defer r.end(n, o, &err, ins...)
	const (
		active = iota
		atEpochEnd
		closed
	)
	// A cache above fills in its first pass: a one-epoch run that stopped
	// it would leave it partial in every run, never filled, so such a join
	// reads its inputs to the end as before; one
	// complete from an earlier run is read only as far as needed (a
	// review: every run read its whole epoch again).
	fills := n.fills
	for epoch := 0; ; epoch++ {
		state := make([]int, len(ins))
		var pulled []*sample.Sample
		pull := func(i int) (*sample.Sample, error) {
			if i < 0 || i >= len(ins) {
				return nil, fmt.Errorf("internal: pull of input %d of %d", i, len(ins))
			}
			if state[i] != active {
				return nil, io.EOF
			}
			it, err := ins[i].next()
			switch {
			case err != nil:
				return nil, err
			case it.end:
				state[i] = closed
				return nil, io.EOF
			case it.eoe:
				state[i] = atEpochEnd
				return nil, io.EOF
			}
			n.in.Add(1)
			pulled = append(pulled, it.s)
			return it.s, nil
		}
		releasePulled := func(keep *sample.Sample) {
			for _, s := range pulled {
				if s != keep {
					release(r.budget, s)
				}
			}
			pulled = pulled[:0]
		}
		emit := func(s *sample.Sample) error {
			err := o.emit(s)
			releasePulled(s)
			return err
		}
		err := j.JoinEpoch(ctx, epoch, len(ins), pull, emit)
		releasePulled(nil)
		if err != nil {
			return n.fail(nil, err)
		}
		// An input's stream ended (a take in an endless run): so does this
		// one, as the take's does, where the other inputs would run on with
		// empty epochs for ever (a watchdog stopped it after
		// 7685, blaming a filter). It ends inside its epoch unless a cache
		// above fills, which the rest of the epoch completes.
		ie, ok := j.(stages.InputEnder)
		inputEnded := ok && r.epochs() < 0 && ie.EndsWithAnInput() && slices.Contains(state, closed)
		if inputEnded && !fills {
			return o.flush()
		}
		if last := r.epochs(); last > 0 && epoch == last-1 && !fills {
			// The last epoch: what the joiner left is never needed, and
			// ending here stops the stages above (a zip of ten labels
			// with a decode of a whole dataset decoded all of it).
			return o.endEpoch(epoch)
		}
		// Drop what the joiner left of this epoch (zip past the shortest
		// input, mix with stop_on_empty): the next epoch begins only once
		// every source's has ended. One sample of each input in turn:
		// inputs reading one stage are fed together, and drained one
		// after another the first filled the queue of the next, which
		// stalled the run.
		for draining := true; draining; {
			draining = false
			for i := range ins {
				if state[i] != active {
					continue
				}
				if _, err := pull(i); errors.Is(err, io.EOF) {
					continue
				} else if err != nil {
					return err
				}
				releasePulled(nil)
				draining = true
			}
		}
		allClosed := true
		for _, st := range state {
			if st != closed {
				allClosed = false
			}
		}
		if allClosed || inputEnded {
			return o.flush()
		}
		if err := o.endEpoch(epoch); err != nil {
			return err
		}
	}
}
