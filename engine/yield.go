package engine

import (
	"runtime"
	"time"
)

// yieldEvery is how much work a stage's goroutine does between yields to
// Go's scheduler: a parallel worker counts the time its jobs took, a stage
// on one goroutine the time between its yields (yielder). Go's monitor
// (sysmon, as of Go 1.26) preempts a goroutine that has run 10 ms without
// being rescheduled, and takes the P of one that is in C meanwhile. A
// decode worker that always finds a job waiting is never rescheduled and
// spends most of its time in libjpeg-turbo; once its P had been taken, it
// came back from C onto an idle P still counted on its old slice, and the
// monitor took that P again at nearly every tick: 22,000 context switches
// in a 10-epoch W1 run, 4,200 with the yields. W1 ran 7.6 % faster, 9.3 %
// over 10 epochs, 6 % on one core (where it decodes on one goroutine);
// bench/RESULTS.md, run AH. It is jobWork, so that a worker on slow
// samples yields after every job.
const yieldEvery = jobWork

// maxYieldStride bounds how many calls a yielder lets pass between two
// clock reads: when cheap samples turn slow (a resumed cache fill passes
// the samples it holds, then decodes the rest), at most this many slow
// ones go by unread, 7 ms for photos, under sysmon's 10 ms.
const maxYieldStride = 4

// yielder yields a stage's goroutine to the scheduler about every
// yieldEvery. A clock read on every sample cost a five-stage chain of
// cheap stages 7 % of its time (BenchmarkEngineOverhead), so it reads the
// clock every stride calls: one while the samples are slow, doubling while
// the reads come less than an eighth of yieldEvery apart, up to
// maxYieldStride, and back to one when a read comes yieldEvery or more
// after the last.
type yielder struct {
	yielded, read time.Time
	stride, n     int
	now           func() time.Time // time.Now unless a test sets it
	yield         func()           // runtime.Gosched unless a test sets it
	// slow is whether the time between the last two clock reads came to
	// slowSample or more a sample: the stage's work or its waits, so a
	// cheap stage below a slow one hands each sample down too, which at
	// that rate costs nothing.
	slow bool
}

// slowSample is how long a sample must take for a stage on one goroutine
// to hand each one down as it is done, rather than in chunks of up to 64:
// a chunk of 7000×7000 photos' 2 s decodes waited minutes for its 64th,
// and a Ctrl-C found none of them in the cache below.
const slowSample = 10 * time.Millisecond

func newYielder() *yielder {
	return &yielder{stride: 1, now: time.Now, yield: runtime.Gosched}
}

// tick is called once per sample.
func (y *yielder) tick() {
	if y.n++; y.n < y.stride {
		return
	}
	y.n = 0
	t := y.now()
	if y.yielded.IsZero() {
		y.yielded, y.read = t, t
		return
	}
	gap := t.Sub(y.read)
	y.slow = gap >= slowSample*time.Duration(y.stride)
	switch {
	case gap >= yieldEvery:
		y.stride = 1
	case gap < yieldEvery/8 && y.stride < maxYieldStride:
		y.stride *= 2
	}
	y.read = t
	if t.Sub(y.yielded) >= yieldEvery {
		y.yield()
		// The goroutines that ran meanwhile are not this stage's time.
		y.yielded = y.now()
		y.read = y.yielded
	}
}
