// Package engine runs a compiled plan as a DAG of goroutines joined by
// bounded channels, under one errgroup and one cancellation context.
//
// Stages are written as synchronous code (package stages); the engine owns
// every goroutine, channel and select on ctx.Done(), the memory budget, the
// ordering of parallel work, epochs, error handling (on_error) and the
// commit or abort of sinks.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/piperun/piperun/budget"
	"github.com/piperun/piperun/expression"
	"github.com/piperun/piperun/gpu"
	"github.com/piperun/piperun/imageops"
	"github.com/piperun/piperun/internal/fileguard"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
	"github.com/piperun/piperun/tensor"
)

// Options configure a run.
type Options struct {
	Registry *stages.Registry
	Log      *zap.Logger
	// Profile times each stage's own work (StageReport.BusyS): its Next,
	// Process or Write calls, less the time its output waited for the
	// stages below. It costs two clock reads per sample.
	Profile bool
	// DiscardSinks runs every sink as a discard: nothing is written or
	// served, however the run ends (a probe for sample sizes).
	DiscardSinks bool
}

// StageError is a failure inside one stage, naming the sample when there
// is one.
type StageError struct {
	Stage  string
	Type   string
	Sample string
	Err    error
}

// Error implements error.
func (e *StageError) Error() string {
	// A cause that names its file already (a TFRecord reader's) is not
	// told the file again.
	if e.Sample != "" && !namesWhole(e.Err.Error(), e.Sample) {
		return fmt.Sprintf("stage %q (%s): %s: %v", e.Stage, e.Type, e.Sample, e.Err)
	}
	return fmt.Sprintf("stage %q (%s): %v", e.Stage, e.Type, e.Err)
}

// Unwrap returns the error e wraps, for errors.Is and errors.As.
func (e *StageError) Unwrap() error { return e.Err }

// namesWhole reports whether msg names name whole: followed by its end or
// by punctuation, not by more of a name (read_file(path + "x") named
// a.txtx, and the sample a.txt went unnamed).
func namesWhole(msg, name string) bool {
	for i := 0; ; {
		j := strings.Index(msg[i:], name)
		if j < 0 {
			return false
		}
		end := i + j + len(name)
		if end == len(msg) || strings.ContainsRune(" :,;)\n\"'", rune(msg[end])) {
			return true
		}
		i += j + 1
	}
}

// Run is a pipeline in progress.
type Run struct {
	plan   *plan.Plan
	opts   Options
	log    *zap.Logger
	budget *budget.Budget
	// cpu is resources.workers, shared by the parallel stages' workers.
	cpu cpuPool
	// room is the budget less what stages keep for their own use
	// (plan.SampleRoom): what the shares of samples are parts of.
	room int64
	// early is the bytes the parallel stages' jobs reserved ahead of
	// their heads, bounded together to a quarter of the budget (window).
	early atomic.Int64
	start time.Time
	nodes []*node

	done   chan struct{}
	cancel context.CancelFunc
	// failed holds the first real failure. A stage that fails cancels the
	// run itself, so other stages may return context.Canceled to the
	// errgroup before the failing one returns its error.
	failMu sync.Mutex
	failed error
	report *Report
	err    error
	// unbindPool hands the tensor pool back when the run ends.
	unbindPool func()
}

// node is the run-time state of one stage.
type node struct {
	pn *plan.Node
	st *spec.Stage
	// holder names the stage to the budget and ranks it by its place in
	// the plan, so the stages further down are served first.
	holder budget.Holder
	impl   any
	env    *stages.Env
	ins    []*link
	outs   []*link
	in     atomic.Int64
	out    atomic.Int64
	// passed counts samples let through untouched, as a cache below
	// already held their results (stages.Env.Skip).
	passed atomic.Int64
	// committed is set once the run has committed this sink's output.
	committed atomic.Bool
	batches   atomic.Int64
	// outBytes sums the sizes of emitted samples, for probing sample sizes.
	outBytes atomic.Int64
	// busy is the stage's own time in nanoseconds, under Options.Profile.
	busy atomic.Int64
	// epochs and perEpoch let the CLI estimate time left once a sink has
	// seen a whole epoch.
	epochs   atomic.Int64
	perEpoch atomic.Int64
	// opened counts the epochs a source has begun, for the watchdog of
	// endless runs whose sinks get nothing (stall.go).
	opened atomic.Int64
	// ended is set on a sink whose input has ended: it gets no more.
	ended atomic.Bool
	// On a sink: from (nanoseconds since the run's start) is when its
	// first Write returned, until when it stopped or, later, committed (0
	// while it runs), and waited the nanoseconds it has since spent
	// waiting for its next sample (SinkReport.WaitedShare).
	from, until, waited atomic.Int64

	mu         sync.Mutex
	skipped    int64
	skipCauses []skipCause

	// idle is set for stages whose every output ends in a cache that is
	// already complete: they are never started.
	idle bool
	// fills, on a join, says a cache above it fills its first pass in
	// this run, which the join then reads to the end (runJoin).
	fills bool
	// passDone, on a cache stage, is closed when its first pass has ended;
	// gates, on a source, are the passDone channels of the caches below
	// it, which it waits for before starting its second epoch, so that no
	// work is done for an epoch a cache will replay.
	passDone chan struct{}
	gates    []chan struct{}
	// through, on a cache stage, is set in an endless run with a take
	// above it: the cache passes every sample on (passThrough).
	through bool
	// fillAbove, on a cache stage, lists the stages whose skips its fill
	// loses (fillSkips).
	fillAbove []*node
	// cached is set for stages whose every output ends in a cache: once
	// the caches' first pass is over, nothing below wants more from them.
	cached bool
}

const maxCauses = 10

// skipCause is one skipped sample's reason, with where it came in the
// input, so that the causes a report keeps are the first in input order
// whichever worker got to its sample first.
type skipCause struct {
	sample bool // the skip concerns a sample (not, say, a file)
	epoch  int
	id     int64
	seq    int64 // arrival, for causes without a sample
	text   string
}

func (c skipCause) before(d skipCause) bool {
	if c.sample != d.sample {
		return c.sample
	}
	if c.sample && (c.epoch != d.epoch || c.id != d.id) {
		if c.epoch != d.epoch {
			return c.epoch < d.epoch
		}
		return c.id < d.id
	}
	return c.seq < d.seq
}

// maxSkipWarnings is how many skips a stage logs at warn level; later
// ones go to debug, so that a run over a badly damaged dataset still
// names every file that was skipped when asked to, without burying the
// rest of its log by default. The report counts them all.
const maxSkipWarnings = 100

func (n *node) skip(s *sample.Sample, err error) {
	c := skipCause{text: err.Error()}
	if s != nil {
		c.sample, c.epoch, c.id = true, s.Epoch, s.ID
		// As a stage error: a cause that names the file already (a
		// reader's) is not told it again.
		if d := n.describe(s); !namesWhole(c.text, d) {
			c.text = d + ": " + c.text
		}
	}
	// The report leaves out an expression's caret drawing: it is for the
	// log, and in JSON reads as escaped noise. Only the drawing: a file's
	// name may hold a newline.
	full := c.text
	c.text, _, _ = strings.Cut(full, "\n | ")
	n.mu.Lock()
	n.skipped++
	c.seq = n.skipped
	seq := n.skipped
	n.keepCause(c)
	n.mu.Unlock()
	c.text = full
	if log := n.env.Log; log != nil {
		// The message reads whole on a terminal; the fields let a JSON
		// log's reader filter by sample and reason.
		fields := func() []zap.Field {
			f := []zap.Field{zap.Int64("skipped", seq), zap.String("reason", err.Error())}
			if s != nil {
				f = append(f, zap.String("sample", n.describe(s)), zap.Int("epoch", s.Epoch), zap.Int64("id", s.ID))
			}
			return f
		}
		switch {
		case seq < maxSkipWarnings:
			log.Warn("skipped: "+c.text, fields()...)
		case seq == maxSkipWarnings:
			log.Warn("skipped: "+c.text+" (further skips at this stage are logged at debug level; the report counts them all)", fields()...)
		default:
			// Checked first: a run skipping millions of samples builds
			// no message that is not written.
			if ce := log.Check(zap.DebugLevel, "skipped"); ce != nil {
				ce.Message = "skipped: " + c.text
				ce.Write(fields()...)
			}
		}
	}
}

// keepCause keeps c among the first maxCauses causes in input order; n.mu
// is held.
func (n *node) keepCause(c skipCause) {
	if len(n.skipCauses) < maxCauses {
		n.skipCauses = append(n.skipCauses, c)
		return
	}
	last := 0
	for i, k := range n.skipCauses {
		if n.skipCauses[last].before(k) {
			last = i
		}
	}
	if c.before(n.skipCauses[last]) {
		n.skipCauses[last] = c
	}
}

// causes returns the kept skip causes in input order; n.mu is held.
func (n *node) causes() []string {
	cs := slices.Clone(n.skipCauses)
	slices.SortFunc(cs, func(a, b skipCause) int {
		switch {
		case a.before(b):
			return -1
		case b.before(a):
			return 1
		}
		return 0
	})
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.text
	}
	return out
}

func (n *node) fail(s *sample.Sample, err error) error {
	var se *StageError
	if errors.As(err, &se) || errors.Is(err, context.Canceled) || errors.Is(err, errDownstreamDone) {
		return err
	}
	var tl *budget.TooLargeError
	var st *stages.StateError
	if errors.As(err, &tl) || errors.As(err, &st) {
		s = nil
	}
	e := &StageError{Stage: n.st.Name, Type: n.st.Type, Err: err}
	if s != nil {
		e.Sample = n.describe(s)
	}
	return e
}

// describe names s in an error. A sample read from a file is named by its
// place there (s.Origin), which every epoch meets again, so in a run of
// several epochs the name says which (a report listed record 10's damage
// twice, worded the same).
func (n *node) describe(s *sample.Sample) string {
	d := s.Describe()
	// A batch's name says its epoch already.
	if s.Origin != "" && n.env.Spec.Epochs != 1 && !strings.Contains(d, "(epoch ") {
		d += fmt.Sprintf(" (epoch %d)", s.Epoch)
	}
	return d
}

// inEpoch adds epoch e to err, an error of a reader's stream that names a
// place in a file, as describe does for a sample's.
func (n *node) inEpoch(e int, err error) error {
	if n.env.Spec.Epochs == 1 {
		return err
	}
	return fmt.Errorf("%w (epoch %d)", err, e)
}

// panicError is the error a panic in stage n's code fails the run with.
// Each stage's goroutine recovers in the same defer that ends its output,
// so the run is cancelled before the stages below see the output close
// and take it for the end of the data.
func panicError(n *node, rec any) error {
	return &StageError{Stage: n.st.Name, Type: n.st.Type, Err: fmt.Errorf("panic: %v\n%s", rec, debug.Stack())}
}

// failPanic fails the run with stage n's panic rec, for a goroutine that
// recovered it and has no stage's end (Run.end) to report it: the run is
// cancelled at once, since the stage may hold memory the others wait for.
func (r *Run) failPanic(n *node, rec any) error {
	err := panicError(n, rec)
	r.fail(err)
	r.cancel()
	return err
}

// handle applies on_error to a per-sample error: nil when it was skipped.
func (n *node) handle(s *sample.Sample, err error) error {
	if err == nil {
		return nil
	}
	if n.st.Skip() && !isControl(err) {
		n.skip(s, err)
		return nil
	}
	return n.fail(s, err)
}

func isControl(err error) bool {
	var tl *budget.TooLargeError
	// A file that shrank while read is no damage to skip: the records
	// after the cut are gone, and one skip counted for them hid the loss.
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, errDownstreamDone) || errors.As(err, &tl) || errors.Is(err, fileguard.ErrShrank)
}

// Start builds every stage and starts the run. Build errors, and a built
// stage of another kind than its type's role, are returned before any
// goroutine starts. Start runs p as it is given: check p.Diagnostics
// first, as piperun apply does, or a plan whose buffers do not fit its
// budget may start and stall.
func Start(ctx context.Context, p *plan.Plan, opts Options) (*Run, error) {
	if opts.Registry == nil {
		opts.Registry = stages.Default()
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	r := &Run{plan: p, opts: opts, log: opts.Log, budget: budget.New(p.Memory), cpu: newCPUPool(p.Workers), room: p.SampleRoom(), done: make(chan struct{})}
	byStage := map[*spec.Stage]*node{}
	skips := skipChains(p)
	caches := map[*spec.Stage]*stages.Cacher{}
	// A stage ranks by its depth below the sources (the longest path from
	// one), so it is served before the stages that feed it, and stages of
	// sibling branches at one depth in the order they asked.
	rank := map[*spec.Stage]int{}
	for _, st := range p.Spec.Order { // inputs first
		for _, in := range st.Inputs {
			rank[st] = max(rank[st], rank[in]+1)
		}
	}
	// The shuffles split one half of the budget, the in-memory caches
	// another (stages.Buffers).
	nShuffles, nCaches := plan.BufferWays(p.Spec)
	// Their halves are of what the stages' own reservations leave the
	// samples: of the whole budget, an interleave's 103 MiB of open files
	// and a shuffle's half filled it, and the run stalled (a re-test).
	shuffleBuffers := stages.NewBuffers(r.room, nShuffles, "shuffles")
	cacheBuffers := stages.NewBuffers(r.room, nCaches, "in-memory caches")
	for _, pn := range p.Nodes {
		t, ok := opts.Registry.Type(pn.Stage.Type)
		if !ok {
			return nil, fmt.Errorf("stage %q: unknown type %q", pn.Stage.Name, pn.Stage.Type)
		}
		n := &node{pn: pn, st: pn.Stage, holder: budget.Holder{Name: pn.Stage.Name, Rank: rank[pn.Stage]}}
		n.env = &stages.Env{
			Spec: p.Spec, Stage: pn.Stage, Seed: p.Seed, Workers: pn.Parallelism, Memory: p.Memory,
			Log:        opts.Log.With(zap.String("stage", pn.Stage.Name)),
			Release:    func(s *sample.Sample) { release(r.budget, s) },
			Hand:       func(to, from *sample.Sample) { hand(r.budget, to, from) },
			Shrink:     func(s *sample.Sample, k int64) { shrink(r.budget, s, k) },
			TryReserve: func(k int64) bool { return r.budget.TryAcquireAt(k, n.holder.Rank) },
			Keep:       func(s *sample.Sample) (*sample.Sample, bool) { return keep(r.budget, s, n.holder.Rank) },
			Copy:       copyKept,
		}
		if bs, ok := pn.Stage.Config.(plan.BufferSharer); ok && bs.BufferShare() > 1 {
			n.env.Buffers = shuffleBuffers
		} else if h, ok := pn.Stage.Config.(plan.EpochHolder); ok && h.EpochShare() >= 1 {
			n.env.Buffers = cacheBuffers
		}
		if c, ok := skips[pn.Stage]; ok {
			if caches[c] == nil {
				caches[c] = new(stages.Cacher)
			}
			ref := caches[c]
			n.env.Cached = func(s *sample.Sample) bool {
				if *ref == nil {
					return false
				}
				_, ok := (*ref).Stored(s.ID)
				return ok
			}
			n.env.Skip = func(s *sample.Sample) bool {
				if *ref == nil {
					return false
				}
				size, ok := (*ref).Stored(s.ID)
				if ok {
					// Reserved from here down: were the cache to reserve
					// the stored sample itself, it could wait for memory
					// that the queue above it, full of such samples,
					// holds (a resumed fill at a tight budget got stuck).
					s.Stands = size
					n.passed.Add(1)
				}
				return ok
			}
		}
		if pn.Reserved > 0 && !r.budget.Keep(pn.Reserved) {
			r.abortBuilt()
			return nil, &StageError{Stage: pn.Stage.Name, Type: pn.Stage.Type, Err: fmt.Errorf("needs %d bytes of the memory budget for itself, more than is free", pn.Reserved)}
		}
		cfg := pn.Stage.Config
		if opts.DiscardSinks && pn.Stage.Role == spec.RoleSink {
			if t, ok = opts.Registry.Type("discard"); !ok {
				return nil, fmt.Errorf("stage %q: DiscardSinks needs the discard type in the registry", pn.Stage.Name)
			}
			cfg = &stages.DiscardConfig{}
		}
		impl, err := t.Build(n.env, cfg)
		if err == nil {
			if err = checkKind(pn.Stage, impl); err != nil {
				// Built and then refused: undone as abortBuilt undoes
				// the others, a sink's temporaries, then its resources.
				// (A Build that failed returns no stage to undo, often a
				// nil pointer in the interface.)
				if sk, ok := impl.(stages.Sink); ok {
					sk.Abort()
				}
				if c, ok := impl.(stages.Closer); ok {
					c.Close()
				}
			}
		}
		if err != nil {
			r.abortBuilt()
			return nil, &StageError{Stage: pn.Stage.Name, Type: pn.Stage.Type, Err: err}
		}
		n.impl = impl
		if c, ok := impl.(stages.Cacher); ok {
			if caches[pn.Stage] == nil {
				caches[pn.Stage] = new(stages.Cacher)
			}
			*caches[pn.Stage] = c
		}
		r.nodes = append(r.nodes, n)
		byStage[pn.Stage] = n
	}
	for _, n := range r.nodes {
		for _, in := range n.st.Inputs {
			l := newLink(plan.QueueChunks + r.extraQueue(byStage[in]))
			n.ins = append(n.ins, l)
			byStage[in].outs = append(byStage[in].outs, l)
		}
	}
	r.markIdle(byStage)
	r.bindPool()
	r.start = time.Now()
	go r.run(ctx)
	return r, nil
}

// extraQueue lets prefetch stages widen their output queue to their
// buffer, and prefetchChunk sends a prefetch's samples one to a chunk, so
// the queue holds its buffer, no less and no more. Chunks of up to
// ChunkSize samples held as few as buffer/ChunkSize samples (a stage hands
// on what it has whenever its input would block; a concat through a
// prefetch of 64 stalled, found by a tester), and a queue of buffer chunks
// held up to ChunkSize times the buffer, filling the budget past what
// validate counted.
func (r *Run) extraQueue(n *node) int {
	if prefetchChunk(n) {
		return n.pn.Buffer
	}
	return 0
}

func prefetchChunk(n *node) bool { return n.st.Type == "prefetch" && n.pn.Buffer > 0 }

// abortBuilt undoes the stages built so far when a later one cannot be:
// the sinks remove the temporaries they opened, and every stage closes.
func (r *Run) abortBuilt() {
	for _, n := range r.nodes {
		if sk, ok := n.impl.(stages.Sink); ok {
			if err := sk.Abort(); err != nil {
				r.log.Warn("abort sink", zap.String("stage", n.st.Name), zap.Error(err))
			}
		}
	}
	r.closeAll()
}

func (r *Run) closeAll() {
	for _, n := range r.nodes {
		if c, ok := n.impl.(stages.Closer); ok {
			c.Close()
		}
	}
}

// bindPool puts the process's pool of recycled tensor buffers inside this
// run's budget, if no other run holds it: idle buffers fill only the free
// room and give way as samples reserve it (tensor.BindPool). A fixed pool
// either drops the buffers a loose budget's steady state cycles through,
// churning the heap (W1's peak RSS grew with run length), or holds idle
// memory beyond a tight budget. The pool is also capped at an eighth of the
// budget: idle buffers are live heap to the collector, which lets the heap
// grow a quarter beyond them (apply's GOGC, for a heap over 64 MiB), and where sizes seldom recur
// (full-resolution photos of every size) a pool filling all the free room
// raised peak RSS at a 256 MiB budget from budget +30–75 MiB to +120 MiB;
// capped at an eighth, +49–60 MiB. W1's steady state cycles 72 MiB of
// buffers at its 1 GiB budget, well inside an eighth.
func (r *Run) bindPool() {
	if r.budget.Limit() <= 0 {
		return
	}
	b := r.budget
	if unbind, ok := tensor.BindPool(func() int64 { return min(b.Limit()-b.Used(), b.Limit()/8) }); ok {
		b.SetSpare(tensor.PoolIdle, tensor.TrimPool)
		r.unbindPool = unbind
	}
}

func (r *Run) run(parent context.Context) {
	defer close(r.done)
	if r.budget.Limit() > 0 {
		defer imageops.SetDecodeMemory(imageops.DecodeMemoryFor(r.budget.Limit()))()
		// No sample can be larger than the budget: a function sizing a
		// tensor from a sample's values refuses one before allocating it.
		defer expression.SetMaxValueBytes(r.budget.Limit())()
	}
	if r.unbindPool != nil {
		defer r.unbindPool()
	}
	runCtx, cancel := context.WithCancel(parent)
	defer cancel()
	r.cancel = cancel
	g, ctx := errgroup.WithContext(runCtx)
	// While the sources start, learn whether huge pages are worth asking
	// for here; the first large buffers come a few milliseconds later.
	g.Go(func() error {
		if h, s, ok := tensor.ProbeHugePages(); ok {
			perMiB := func(d time.Duration) string { return fmt.Sprintf("%.2f ms/MiB", d.Seconds()*1e3) }
			huge := "not tried: 4 KiB pages are cheap enough, or the kernel refused MADV_HUGEPAGE"
			if h > 0 {
				huge = perMiB(h)
			}
			r.log.Debug("first write to fresh memory", zap.String("4KiB_pages", perMiB(s)), zap.String("huge_pages", huge), zap.Bool("asking_for_huge_pages", h > 0 && h < s))
		}
		return nil
	})
	for _, n := range r.nodes {
		if n.idle {
			for _, l := range n.outs {
				close(l.ch)
			}
			// A producer that also feeds a running branch keeps sending
			// here: stop it, and release what it sent before it saw that.
			if len(n.ins) > 0 {
				g.Go(func() error {
					ins := make([]*inlet, len(n.ins))
					for i, l := range n.ins {
						ins[i] = r.newInlet(ctx, l, nil)
					}
					r.finish(nil, nil, ins...)
					return nil
				})
			}
			continue
		}
		g.Go(func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = r.failPanic(n, p)
				}
			}()
			err = r.runNode(ctx, g, n)
			if errors.Is(err, errDownstreamDone) {
				return nil
			}
			if err != nil {
				r.fail(err)
			}
			return err
		})
	}
	wctx, stopWatch := context.WithCancel(runCtx)
	watched := make(chan struct{})
	// Beside the group, not in it: the watchdog watches the group's
	// goroutines and ends when they have, which g.Wait would wait on.
	go func() { r.watch(wctx); close(watched) }()
	err := g.Wait()
	stopWatch()
	<-watched
	r.failMu.Lock()
	if r.failed != nil {
		err = r.failed
	}
	r.failMu.Unlock()
	if err == nil && parent.Err() != nil {
		err = parent.Err()
	}
	// Sinks commit only when every stage finished cleanly; otherwise they
	// abort, so outputs appear whole or not at all.
	if err == nil {
		err = r.commit(parent)
	}
	if err != nil {
		for _, n := range r.nodes {
			if sk, ok := n.impl.(stages.Sink); ok {
				if aerr := sk.Abort(); aerr != nil {
					r.log.Warn("abort sink", zap.String("stage", n.st.Name), zap.Error(aerr))
				}
			}
		}
	}
	r.closeAll()
	r.err = err
	r.report = r.snapshot(err)
	// What stages reserved for their own use (a disk cache's tables) goes
	// back with them, after the report has read the peak.
	for _, n := range r.nodes {
		r.budget.Unkeep(n.pn.Reserved)
	}
}

// commit commits the sinks of a run that succeeded, in steps, so that a
// failure leaves no output in place: every sink that writes files
// prepares them (written, synced, closed, final names checked); the sinks
// that announce the end to a process outside (serve) wait until it has
// read everything; then the other sinks commit (a cache), then the files
// are renamed into place; last, the announcers announce.
// A failure at one step aborts all the sinks, before any file is renamed,
// unless a rename itself fails, which the preparation has made unlikely.
func (r *Run) commit(ctx context.Context) error {
	stepErr := func(n *node, what string, err error) error {
		return &StageError{Stage: n.st.Name, Type: n.st.Type, Err: fmt.Errorf("%s: %w", what, err)}
	}
	var files, rest, announcers []*node
	for _, n := range r.nodes {
		sk, ok := n.impl.(stages.Sink)
		if !ok {
			continue
		}
		if p, ok := sk.(stages.Preparer); ok {
			if err := p.Prepare(); err != nil {
				return stepErr(n, "commit", err)
			}
			files = append(files, n)
			continue
		}
		if _, ok := sk.(stages.Announcer); ok {
			announcers = append(announcers, n)
			continue
		}
		rest = append(rest, n)
	}
	// Every trainer has read everything before anything is committed: a
	// run stopped while a serve sink waits leaves no file in place and no
	// trainer, of this sink or another, holding a clean end.
	for _, n := range announcers {
		if d, ok := n.impl.(stages.Drainer); ok {
			err := d.Drain(ctx)
			n.until.Store(max(1, int64(time.Since(r.start))))
			if err != nil {
				return stepErr(n, "commit", err)
			}
		}
	}
	for _, step := range [][]*node{rest, files, announcers} {
		for _, n := range step {
			var err error
			if cc, ok := n.impl.(stages.ContextCommitter); ok {
				err = cc.CommitContext(ctx)
			} else {
				err = n.impl.(stages.Sink).Commit()
			}
			// A serve sink's Commit waits for its trainer to take the
			// frames still buffered: time in which the sink waited for
			// nothing, which its waited share must count, as it counts
			// the time between trainers there (stages.Idler), whether the
			// commit succeeds or not. A Drainer did that wait above, and
			// its end stays there: since then it waited on the others.
			if _, ok := n.impl.(stages.Drainer); !ok {
				n.until.Store(max(1, int64(time.Since(r.start))))
			}
			if err != nil {
				return stepErr(n, "commit", err)
			}
			n.committed.Store(true)
		}
	}
	return nil
}

// Wait blocks until the run ends and returns its report.
func (r *Run) Wait() (*Report, error) {
	<-r.done
	return r.report, r.err
}

// Done is closed when the run has ended.
func (r *Run) Done() <-chan struct{} { return r.done }

// MemoryHeld returns the bytes of the budget reserved now. Once a run has
// ended cleanly it is 0: every stage gave back what it held, whether it
// read its input to the end or stopped early (a take below it). A failed
// run's budget dies with it, so what its stages held is not counted back.
func (r *Run) MemoryHeld() int64 { return r.budget.Used() }

// kindOf returns the role a built stage runs in and the name of its kind,
// tried in runNode's order: a value of several kinds runs as the first.
func kindOf(impl any) (spec.Role, string, bool) {
	switch impl.(type) {
	case stages.Cacher:
		return spec.RoleTransform, "cache", true
	case stages.Source:
		return spec.RoleSource, "source", true
	case stages.Sink:
		return spec.RoleSink, "sink", true
	case stages.Joiner:
		return spec.RoleJoin, "joiner", true
	case stages.Expander:
		return spec.RoleTransform, "expander", true
	case stages.Processor:
		return spec.RoleTransform, "processor", true
	}
	return 0, "", false
}

// checkKind refuses a built stage that cannot run in its type's role: the
// engine wires a stage by its role and runs it by its kind, and a mismatch
// (a transform built as a sink) started and then stalled with nothing to
// say why.
func checkKind(st *spec.Stage, impl any) error {
	if impl == nil {
		return fmt.Errorf("type %s is a %s, but its Build returned nil and no error", st.Type, st.Role)
	}
	role, kind, ok := kindOf(impl)
	switch {
	case !ok:
		return fmt.Errorf("type %s is a %s, but its Build returned %T, which is no stage kind (Source, Processor, Expander, Joiner or Sink)", st.Type, st.Role, impl)
	case role != st.Role:
		return fmt.Errorf("type %s is a %s, but its Build returned %T, a %s", st.Type, st.Role, impl, kind)
	}
	return nil
}

func (r *Run) runNode(ctx context.Context, g *errgroup.Group, n *node) error {
	switch impl := n.impl.(type) {
	case stages.Cacher:
		return r.runCache(ctx, n, impl)
	case stages.Source:
		return r.runSource(ctx, n, impl)
	case stages.Sink:
		return r.runSink(ctx, n, impl)
	case stages.Joiner:
		return r.runJoin(ctx, n, impl)
	case stages.Expander:
		return r.runExpand(ctx, g, n, impl)
	case stages.Processor:
		if n.pn.Parallelism > 1 {
			return r.runParallel(ctx, g, n, impl)
		}
		return r.runProcess(ctx, g, n, impl)
	}
	return fmt.Errorf("stage %q: type %s built %T, which is no stage kind", n.st.Name, n.st.Type, n.impl)
}

func (r *Run) newOutlet(ctx context.Context, n *node) *outlet {
	size := r.plan.ChunkSize
	if prefetchChunk(n) {
		size = 1
	}
	o := newOutlet(ctx, n.outs, size, r.budget)
	o.holder = n.holder
	o.onEmit = func(k int, bytes int64) { n.out.Add(int64(k)); n.outBytes.Add(bytes) }
	return o
}

func (r *Run) newInlet(ctx context.Context, l *link, o *outlet) *inlet {
	in := &inlet{ctx: ctx, l: l}
	if o != nil {
		in.idle = o.flush
	}
	return in
}

// fail records the run's first failure that is not a cancellation.
func (r *Run) fail(err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, errDownstreamDone) {
		return
	}
	r.failMu.Lock()
	if r.failed == nil {
		r.failed = err
	}
	r.failMu.Unlock()
}

// end is what every stage's goroutine defers: a panic in the stage's code
// becomes its error (panicError) before finish runs, so the run is
// cancelled before the stages below see the output close. It must be the
// deferred call itself, for recover to see the panic.
func (r *Run) end(n *node, o *outlet, err *error, ins ...*inlet) {
	if rec := recover(); rec != nil {
		*err = panicError(n, rec)
	}
	r.finish(o, *err, ins...)
}

// finish closes a stage's output and lets its inputs go. After a clean
// end it drains each input until its producer closes, so nothing sent after
// the stop stays reserved; after a failure it cancels the run first, since
// a producer may be waiting for memory this stage will never free.
func (r *Run) finish(o *outlet, err error, ins ...*inlet) {
	if err != nil && !errors.Is(err, errDownstreamDone) {
		r.fail(err)
		r.cancel()
	}
	if o != nil {
		o.close()
	}
	// Stop every input before draining any: a join's producers may feed
	// one another (zip(a, filter(a))), and one waiting for its drain while
	// another was not yet stopped could wait forever.
	for _, in := range ins {
		in.stop(r.budget)
	}
	for _, in := range ins {
		for {
			select {
			case c, ok := <-in.l.ch:
				if !ok {
					goto next
				}
				in.l.queued.Add(-c.bytes)
				releaseAll(r.budget, c.samples)
			case <-in.ctx.Done():
				goto next
			}
		}
	next:
	}
}

func (r *Run) epochs() int {
	if r.plan.Spec.Epochs == 0 {
		return -1
	}
	return r.plan.Spec.Epochs
}

func (r *Run) runSource(ctx context.Context, n *node, src stages.Source) (err error) {
	o := r.newOutlet(ctx, n)
	// On a failure the run is cancelled before the outlet closes, or the
	// stages below would take the close for the end of the data.
	defer r.end(n, o, &err)
	for e := 0; r.epochs() < 0 || e < r.epochs(); e++ {
		if e > 0 {
			for _, gate := range n.gates {
				select {
				case <-gate:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if n.cached {
				// The caches replay the rest. Opening another epoch would
				// send samples nothing reads, counted as sent.
				break
			}
		}
		if err := src.Open(ctx, e); err != nil {
			return n.fail(nil, err)
		}
		n.opened.Add(1)
		for {
			t0 := r.clock()
			s, err := src.Next(ctx)
			n.busyFrom(t0, 0)
			if err == io.EOF {
				break
			}
			if err != nil {
				if herr := n.handle(s, err); herr != nil {
					return herr
				}
				continue
			}
			if err := o.emit(s); err != nil {
				return n.fail(s, err)
			}
		}
		if err := o.endEpoch(e); err != nil {
			return err
		}
	}
	return o.flush()
}

// emitter wraps an outlet for a processor: it counts output and remembers
// whether the input itself was passed on.
type emitter struct {
	o       *outlet
	in      *sample.Sample
	passed  bool
	emitted int
	// profile times the emits, so the stage's busy time leaves out its
	// waits for the stages below; waited sums them.
	profile bool
	waited  time.Duration
}

func (e *emitter) emit(s *sample.Sample) error {
	if s == e.in {
		e.passed = true
	}
	e.emitted++
	if !e.profile {
		return e.o.emit(s)
	}
	t0 := time.Now()
	err := e.o.emit(s)
	e.waited += time.Since(t0)
	return err
}

// clock returns the time when the run is profiled, for busyFrom.
func (r *Run) clock() time.Time {
	if !r.opts.Profile {
		return time.Time{}
	}
	return time.Now()
}

// busyFrom adds the time since t0, less waited, to n's busy time.
func (n *node) busyFrom(t0 time.Time, waited time.Duration) {
	if !t0.IsZero() {
		n.busy.Add(int64(time.Since(t0) - waited))
	}
}

func (r *Run) runProcess(ctx context.Context, g *errgroup.Group, n *node, p stages.Processor) (err error) {
	o := r.newOutlet(ctx, n)
	in := r.newInlet(ctx, n.ins[0], o)
	if pf, ok := p.(stages.Prefetcher); ok {
		var stop func()
		in.prefetch, stop = r.startPrefetch(ctx, g, n, pf)
		defer stop()
	}
	defer r.end(n, o, &err, in)
	if d, ok := p.(stages.Dropper); ok {
		defer d.Drop() // before finish drains the input: a producer may wait on this memory
	}
	_, retains := p.(stages.Retainer)
	em := &emitter{o: o, profile: r.opts.Profile}
	open, last := false, 0 // samples came since the last end of epoch; the last one's epoch
	yield := newYielder()
	for {
		it, err := in.next()
		if err != nil {
			return err
		}
		switch {
		case it.end:
			// A stream cut part-way through an epoch (take, with endless
			// epochs) ends without a marker; a batch or shuffle still gives
			// up what it holds.
			if ee, ok := p.(stages.EpochEnder); ok && open {
				if err := ee.EndEpoch(ctx, last, o.emit); err != nil {
					return n.fail(nil, err)
				}
			}
			return o.flush()
		case it.eoe:
			open = false
			if ee, ok := p.(stages.EpochEnder); ok {
				if err := ee.EndEpoch(ctx, it.epoch, o.emit); err != nil {
					return n.fail(nil, err)
				}
			}
			if err := o.endEpoch(it.epoch); err != nil {
				return err
			}
		default:
			if allStopped(n.outs) {
				release(r.budget, it.s)
				return errDownstreamDone
			}
			n.in.Add(1)
			em.in, em.passed, em.emitted = it.s, false, 0
			open, last = true, it.s.Epoch // it.s belongs downstream once emitted
			t0 := r.clock()
			err := p.Process(ctx, it.s, em.emit)
			n.busyFrom(t0, em.waited)
			em.waited = 0
			if !em.passed && !retains {
				release(r.budget, it.s)
			}
			if yield.tick(); yield.slow {
				if err := o.flush(); err != nil {
					return err
				}
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					// The stage needs no more input (take). With a set
					// number of epochs (one: take ends the stream only
					// then) the epoch is complete; with endless epochs the
					// stream is cut part-way, and the end of the stream
					// tells the stages below (a cache must not take it for
					// a whole epoch to replay).
					if r.epochs() > 0 {
						return o.endEpoch(last)
					}
					return o.flush()
				}
				if herr := n.handle(it.s, err); herr != nil {
					return herr
				}
			}
		}
	}
}

func (r *Run) runSink(ctx context.Context, n *node, sk stages.Sink) (err error) {
	in := r.newInlet(ctx, n.ins[0], nil)
	defer r.end(n, nil, &err, in)
	defer func() { n.until.Store(max(1, int64(time.Since(r.start)))) }()
	// The wait is counted from the first Write's return: before it, a
	// serve sink waits for its trainer to connect, and the pipeline for
	// its first samples, neither of which says whether it keeps up.
	delivered := false
	for {
		var t0 time.Time
		if delivered {
			t0 = time.Now()
		}
		it, err := in.next()
		if delivered {
			n.waited.Add(int64(time.Since(t0)))
		}
		if err != nil {
			return err
		}
		if it.end {
			n.ended.Store(true)
			return nil
		}
		if it.eoe {
			if n.epochs.Add(1) == 1 {
				n.perEpoch.Store(n.out.Load())
			}
			if ee, ok := sk.(stages.EpochEnder); ok {
				if err := ee.EndEpoch(ctx, it.epoch, nil); err != nil {
					return n.fail(nil, err)
				}
			}
			continue
		}
		rows := it.s.BatchSize
		t1 := r.clock()
		err = sk.Write(ctx, it.s)
		n.busyFrom(t1, 0)
		release(r.budget, it.s)
		if err != nil {
			return n.fail(it.s, err)
		}
		// Counted once written: a serve sink's first Write waits for a
		// trainer, and a run stopped then has sent nothing.
		n.in.Add(1)
		if rows > 0 {
			n.batches.Add(1)
			n.out.Add(int64(rows))
		} else {
			n.out.Add(1)
		}
		if !delivered {
			delivered = true
			n.from.Store(max(1, int64(time.Since(r.start))))
		}
	}
}

// Report is what a run returns and `apply --report` writes. Skipped and
// SkipCauses are this run's; what the stages above a cache skipped in the
// run that filled it is that cache's record, under Caches
// (stages.CacheStats.SkippedWhenFilled).
type Report struct {
	OK                bool                  `json:"ok"`
	ElapsedS          float64               `json:"elapsed_s"`
	Sinks             map[string]SinkReport `json:"sinks"`
	Skipped           map[string]int64      `json:"skipped"`
	SkipCauses        map[string][]string   `json:"skip_causes,omitempty"`
	PeakMemoryBytes   int64                 `json:"peak_memory_bytes"`
	MemoryBudgetBytes int64                 `json:"memory_budget_bytes"`
	// Seed is the run's seed; absent when the spec did not compile.
	// SeedRandom says the spec set none, so the seed was drawn for this
	// run: setting it (--set seed=N) repeats the run.
	Seed       *uint64                      `json:"seed,omitempty"`
	SeedRandom bool                         `json:"seed_random,omitempty"`
	Stages     map[string]StageReport       `json:"stages"`
	Caches     map[string]stages.CacheStats `json:"caches,omitempty"`
	Error      string                       `json:"error,omitempty"`
	Extra      map[string]any               `json:"extra,omitempty"`
	// Rewrites lists what the planner changed in the DAG as written.
	Rewrites []plan.Rewrite `json:"rewrites,omitempty"`
	// GPU is what the NVML monitor saw during the run (apply --gpu).
	GPU       *gpu.Summary `json:"gpu,omitempty"`
	sinkOrder []string
}

// SinkReport counts what one sink received.
type SinkReport struct {
	Samples int64 `json:"samples"`
	Batches int64 `json:"batches"`
	// Epochs is the number of complete epochs the sink has received.
	Epochs int64 `json:"epochs"`
	// PerEpoch is the samples of the first complete epoch, 0 before then.
	PerEpoch int64 `json:"-"`
	// ActiveS is the time from the return of the sink's first Write to
	// its end (its commit, once committed), less the time it then had no
	// consumer (stages.Idler: a serve sink between trainers); 0 while it
	// has written nothing, as when a serve sink still waits for a trainer.
	// WaitedS is the part of it the sink spent waiting for its next
	// sample, and WaitedShare their ratio: high when the pipeline held the
	// sink (a serve sink's trainer) back, near 0 when the sink was the
	// slow end.
	ActiveS     float64 `json:"active_s"`
	WaitedS     float64 `json:"waited_s"`
	WaitedShare float64 `json:"waited_share"`
	// Committed says the sink's output is in place (its files renamed,
	// its trainer told the stream ended): false for a sink whose samples
	// were received but put nowhere, as in a run that failed or was
	// stopped before its commit.
	Committed bool `json:"committed"`
	// Idle says the sink is waiting for a consumer now (stages.Idler).
	Idle bool `json:"-"`
}

// StageReport counts one stage's traffic.
type StageReport struct {
	// Bytes is the total size of the samples the stage emitted.
	Bytes int64 `json:"bytes"`
	In    int64 `json:"in"`
	Out   int64 `json:"out"`
	// BusyS is the stage's own time, summed over its workers, when the
	// run was profiled (Options.Profile); Workers is how many it had.
	BusyS   float64 `json:"busy_s,omitempty"`
	Workers int     `json:"workers,omitempty"`
	// PassedToCache counts the samples among In that the stage let
	// through untouched, as the cache below already held their results
	// from an earlier, interrupted run: work not done again.
	PassedToCache int64 `json:"passed_to_cache,omitempty"`
}

// SinkNames lists the sinks in spec order.
func (rep *Report) SinkNames() []string { return rep.sinkOrder }

// Progress returns a report of the run so far.
func (r *Run) Progress() *Report { return r.snapshot(nil) }

func (r *Run) snapshot(err error) *Report {
	rep := &Report{
		OK: err == nil, ElapsedS: time.Since(r.start).Seconds(),
		Sinks: map[string]SinkReport{}, Skipped: map[string]int64{}, Stages: map[string]StageReport{},
		PeakMemoryBytes: r.budget.Peak(), MemoryBudgetBytes: r.budget.Limit(), Seed: &r.plan.Seed, SeedRandom: r.plan.SeedRandom,
		Rewrites: r.plan.Rewrites,
	}
	if err != nil {
		rep.Error = err.Error()
	}
	for _, n := range r.nodes {
		n.mu.Lock()
		if n.skipped > 0 {
			rep.Skipped[n.st.Name] = n.skipped
			if rep.SkipCauses == nil {
				rep.SkipCauses = map[string][]string{}
			}
			rep.SkipCauses[n.st.Name] = n.causes()
		}
		n.mu.Unlock()
		if c, ok := n.impl.(stages.Cacher); ok {
			if rep.Caches == nil {
				rep.Caches = map[string]stages.CacheStats{}
			}
			rep.Caches[n.st.Name] = c.Stats()
		}
		if n.st.Role == spec.RoleSink {
			sr := SinkReport{Samples: n.out.Load(), Batches: n.batches.Load(), Epochs: n.epochs.Load(), PerEpoch: n.perEpoch.Load(), Committed: n.committed.Load()}
			if id, ok := n.impl.(stages.Idler); ok {
				// Before its first sample too: waiting for the first
				// trainer is what a run that shows 0 samples does.
				sr.Idle = id.Idle()
			}
			if from := n.from.Load(); from > 0 {
				until := n.until.Load()
				if until == 0 {
					until = int64(time.Since(r.start))
				}
				waited := n.waited.Load()
				sr.WaitedS = time.Duration(waited).Seconds()
				active := until - from
				if id, ok := n.impl.(stages.Idler); ok {
					// Time without a consumer says nothing of the pipeline.
					active -= int64(id.IdleTime())
				}
				if active > 0 {
					sr.ActiveS = time.Duration(active).Seconds()
					sr.WaitedShare = min(1, float64(waited)/float64(active))
				}
			}
			rep.Sinks[n.st.Name] = sr
			rep.sinkOrder = append(rep.sinkOrder, n.st.Name)
		} else {
			sr := StageReport{In: n.in.Load(), Out: n.out.Load(), Bytes: n.outBytes.Load(), PassedToCache: n.passed.Load()}
			if r.opts.Profile {
				sr.BusyS, sr.Workers = time.Duration(n.busy.Load()).Seconds(), max(1, n.pn.Parallelism)
			}
			rep.Stages[n.st.Name] = sr
		}
	}
	sort.Strings(rep.sinkOrder)
	return rep
}
