package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/piperun/piperun/budget"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// A run can stop with every stage waiting on another: a stage holding
// memory waits for more that only a stage waiting on it could free (tight
// budgets with sharply growing samples, the README's known limit), or a
// concat drains one input while the other, fed by the same stage, is full.
// Go's own deadlock detector stays quiet, since other goroutines (timers,
// Badger's) live on. The watchdog below turns such a run into an error
// instead of a hang.

// ErrStalled is wrapped by the error of a run that stopped with every
// stage waiting on another.
var ErrStalled = errors.New("the run is stuck: every stage is waiting for memory or for another stage, and none can move")

// A run is stuck when, over stallChecks checks stallEvery apart, no sample
// moved, no memory was reserved or released, and at each check every
// goroutine of the engine was parked in the engine's own waits. A goroutine
// in stage code (a slow decode, a read, Badger's writes) counts as moving,
// so a slow run is never mistaken for a stuck one.
const (
	stallEvery  = 250 * time.Millisecond
	stallChecks = 8
)

// SinkState says whether a sink's input has ended (it gets no more), and
// how many epochs the sources above it have begun to read: a sink that
// gets nothing while they read many never will. ok is false when no sink
// has that name.
func (r *Run) SinkState(name string) (ended bool, epochsAbove int64, ok bool) {
	byStage := map[*spec.Stage]*node{}
	var sink *node
	for _, n := range r.nodes {
		byStage[n.st] = n
		if n.st.Name == name && n.st.Role == spec.RoleSink {
			sink = n
		}
	}
	if sink == nil {
		return false, 0, false
	}
	seen := map[*node]bool{}
	var walk func(n *node)
	walk = func(n *node) {
		for _, in := range n.st.Inputs {
			if up := byStage[in]; up != nil && !seen[up] {
				seen[up] = true
				epochsAbove = max(epochsAbove, up.opened.Load())
				walk(up)
			}
		}
	}
	walk(sink)
	return sink.ended.Load(), epochsAbove, true
}

// emptyEpochs is how many whole epochs an endless run's sources may read
// while no sample reaches a sink before the watchdog calls it endless: a
// stage that drops every sample of an epoch (a skip of more than one, a
// batch with drop_remainder larger than one) keeps samples moving, so the
// stuck check never fires, and the run would spin for ever.
const emptyEpochs = EmptyEpochs

// EmptyEpochs is how many whole epochs an endless run's sources may read
// while no sample reaches a sink before the run fails with
// ErrNothingReachesTheSinks. It is exported for callers that watch a run
// themselves with a rule of their own (validate --probe waits for every
// sink, where the run fails only when none gets a sample).
const EmptyEpochs = 1000

// ErrNothingReachesTheSinks fails an endless run whose sinks get nothing.
var ErrNothingReachesTheSinks = errors.New("epochs: 0 (until stopped), but no sample reaches a sink")

// watch runs until ctx ends, failing the run if it gets stuck.
func (r *Run) watch(ctx context.Context) {
	t := time.NewTicker(stallEvery)
	defer t.Stop()
	last, stuck := r.moves(), 0
	sunk, openedThen := int64(-1), int64(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if r.epochs() < 0 {
			in, opened := r.sinkProgress()
			switch {
			case in != sunk:
				sunk, openedThen = in, opened
			case opened-openedThen >= emptyEpochs:
				r.fail(fmt.Errorf("%w in %d epochs: the sources give none, or a stage drops every sample of an epoch (a skip or batch larger than one, a filter that passes none); the run would never end", ErrNothingReachesTheSinks, opened-openedThen))
				r.cancel()
				return
			}
		}
		m := r.moves()
		if m != last || !allParked(stacks()) {
			last, stuck = m, 0
			continue
		}
		if stuck++; stuck < stallChecks {
			continue
		}
		err := r.stallError()
		if ce := r.log.Check(zap.DebugLevel, "stuck run"); ce != nil {
			ce.Write(zap.ByteString("goroutines", stacks()))
		}
		r.fail(err)
		r.cancel()
		return
	}
}

// stallError says where a stuck run's memory is held and who waits for it,
// or, when nobody waits for memory, which stages join inputs that share a
// source (a concat draining one input while the other's queue is full).
func (r *Run) stallError() error {
	n, want := r.budget.Waiting()
	if n == 0 {
		if joins := r.sharedJoins(); len(joins) > 0 {
			return fmt.Errorf("%w (no stage waits for memory; %s: give each input its own source, or room for a whole epoch between the common stage and the join, e.g. a prefetch)", ErrStalled, strings.Join(joins, "; "))
		}
		return fmt.Errorf("%w (no stage waits for memory: check for a concat whose inputs read one stage)", ErrStalled)
	}
	var queued []string
	var inQueues int64
	for _, nd := range r.nodes {
		for i, l := range nd.outs {
			if q := l.queued.Load(); q > 0 {
				inQueues += q
				queued = append(queued, fmt.Sprintf("%s %s→%s", spec.ByteSize(q), nd.st.Name, r.consumerOf(nd, i)))
			}
		}
	}
	where := "none queued between stages"
	if len(queued) > 0 {
		where = "queued " + strings.Join(queued, ", ")
	}
	rest := r.budget.Used() - inQueues
	var reserved int64
	var hints []string
	for _, nd := range r.nodes {
		if h, ok := nd.impl.(stages.Holder); ok && h.Holding() > 0 {
			where += fmt.Sprintf(", %s in %s %q", spec.ByteSize(h.Holding()), nd.st.Type, nd.st.Name)
			rest -= h.Holding()
		}
		// Memory a stage reserves for itself at the start (an on-disk
		// cache's) is no sample's, and a budget it takes most of leaves
		// samples little: say so, or the advice reads as if several
		// samples did not fit in room that in fact holds them.
		if res := nd.pn.Reserved; res > 0 {
			where += fmt.Sprintf(", %s reserved by %s %q for its own use", spec.ByteSize(res), nd.st.Type, nd.st.Name)
			if nd.pn.ReservedFor != "" {
				where += " (" + nd.pn.ReservedFor + ")"
			}
			rest -= res
			reserved += res
		}
		// An interleave holds a record of every file it has open, and
		// reads ahead of that: with records large for the budget its
		// width is what to lower.
		if e, ok := nd.impl.(stages.Expander); ok {
			if cycle, _ := e.Interleave(); cycle > 1 {
				hints = append(hints, fmt.Sprintf("lower cycle_length of %s %q (%d files open at once, a record of each held)", nd.st.Type, nd.st.Name, cycle))
			}
		}
	}
	// Each worker of a parallel stage holds its samples in and out, and
	// finished ones wait for their turn: chains of parallel maps stalled
	// at budgets of 5 to 20 samples that ran at parallelism 1 (a tester).
	var parallel []string
	for _, nd := range r.nodes {
		if nd.pn.Parallelism > 1 {
			parallel = append(parallel, fmt.Sprintf("%s %q (%d)", nd.st.Type, nd.st.Name, nd.pn.Parallelism))
		}
	}
	if len(parallel) > 0 {
		hints = append(hints, "lower the parallelism of "+strings.Join(parallel, ", ")+": each worker holds its samples in and out, and finished ones wait their turn")
	}
	if reserved > 0 {
		hints = append(hints, fmt.Sprintf("count the %s reserved in resources.memory: it leaves samples %s", spec.ByteSize(reserved), spec.ByteSize(max(0, r.budget.Limit()-reserved))))
	}
	more := ""
	if len(hints) > 0 {
		more = "; or " + strings.Join(hints, "; or ")
	}
	waits := fmt.Sprintf("%s more asked for by %d waiting", spec.ByteSize(want), n)
	if who := r.budget.Waiters(); len(who) > 0 {
		waits = "waiting for more: " + strings.Join(who, ", ")
	}
	// The advice names the size that was asked for: a budget of a few
	// samples' size is the usual cause (full-resolution decodes under a
	// small budget), and a spec may have no batch to speak of.
	return fmt.Errorf("%w (memory budget %s: %s held: %s, %s inside other stages; %s): raise resources.memory to hold several of the largest samples at once (%s was asked for here), or make them smaller earlier (resize in the decode)%s",
		ErrStalled, spec.ByteSize(r.budget.Limit()), spec.ByteSize(r.budget.Used()), where, spec.ByteSize(max(0, rest)), waits, spec.ByteSize(want), more)
}

// consumerOf names the stage that reads nd's i-th output.
func (r *Run) consumerOf(nd *node, i int) string {
	l := nd.outs[i]
	for _, c := range r.nodes {
		for _, in := range c.ins {
			if in == l {
				return c.st.Name
			}
		}
	}
	return "?"
}

// sharedJoins names the stages with several inputs that descend from one
// stage.
func (r *Run) sharedJoins() []string {
	var out []string
	for _, nd := range r.nodes {
		if len(nd.st.Inputs) < 2 {
			continue
		}
		seen := map[*spec.Stage]int{}
		shared := false
		for i, in := range nd.st.Inputs {
			for _, a := range ancestors(in) {
				if j, ok := seen[a]; ok && j != i {
					shared = true
				}
				seen[a] = i
			}
		}
		if shared {
			how := "reads one stage through several inputs"
			if nd.st.Type == "concat" {
				how += " and drains them in turn"
			}
			out = append(out, fmt.Sprintf("%s %q %s", nd.st.Type, nd.st.Name, how))
		}
	}
	return out
}

// ancestors returns s and every stage upstream of it.
func ancestors(s *spec.Stage) []*spec.Stage {
	seen := map[*spec.Stage]bool{}
	var out []*spec.Stage
	var walk func(*spec.Stage)
	walk = func(s *spec.Stage) {
		if seen[s] {
			return
		}
		seen[s] = true
		out = append(out, s)
		for _, in := range s.Inputs {
			walk(in)
		}
	}
	walk(s)
	return out
}

// sinkProgress returns the samples the sinks have taken and the most
// epochs any source has begun.
func (r *Run) sinkProgress() (in, opened int64) {
	for _, n := range r.nodes {
		if n.st.Role == spec.RoleSink {
			in += n.in.Load()
		}
		opened = max(opened, n.opened.Load())
	}
	return in, opened
}

// moves sums the run's counters of progress: memory reserved and released,
// samples in and out of every stage.
func (r *Run) moves() uint64 {
	m := r.budget.Moves()
	for _, n := range r.nodes {
		m += uint64(n.in.Load()) + uint64(n.out.Load())
	}
	return m
}

func stacks() []byte {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return buf[:n]
		}
		buf = make([]byte, 2*len(buf))
	}
}

// The prefixes of the engine's and the budget's functions in a dump, from
// the types' own package paths so a renamed module still matches.
var (
	enginePkg = reflect.TypeFor[Run]().PkgPath() + "."
	budgetPkg = reflect.TypeFor[budget.Budget]().PkgPath() + "."
)

// parkedStates are the goroutine states of a wait on a channel, a
// condition, a wait group or a lock.
var parkedStates = map[string]bool{
	"select": true, "select (no cases)": true, "chan send": true, "chan receive": true,
	"chan send (nil chan)": true, "chan receive (nil chan)": true,
	"sync.Cond.Wait": true, "sync.WaitGroup.Wait": true, "sync.Mutex.Lock": true,
	"sync.RWMutex.Lock": true, "sync.RWMutex.RLock": true, "semacquire": true,
}

// allParked reports whether the dump (runtime.Stack of all goroutines)
// shows at least one engine goroutine and every engine goroutine parked
// in a wait of the engine's own (or the budget's), not in stage code.
func allParked(dump []byte) bool {
	engines := 0
	for _, g := range bytes.Split(dump, []byte("\n\n")) {
		if !bytes.Contains(g, []byte(enginePkg)) || bytes.Contains(g, []byte(enginePkg+"(*Run).watch")) {
			continue
		}
		engines++
		lines := bytes.Split(g, []byte("\n"))
		// "goroutine 7 [chan receive, 2 minutes]:"
		h := lines[0]
		i, j := bytes.IndexByte(h, '['), bytes.LastIndexByte(h, ']')
		if i < 0 || j < i {
			return false
		}
		state, _, _ := bytes.Cut(h[i+1:j], []byte(", "))
		if !parkedStates[string(state)] {
			return false
		}
		// The first frame outside the runtime, sync and errgroup is the
		// code that waits: it must be the engine's.
		for _, l := range lines[1:] {
			if len(l) == 0 || l[0] == '\t' {
				continue
			}
			if bytes.HasPrefix(l, []byte("runtime.")) || bytes.HasPrefix(l, []byte("sync.")) ||
				bytes.HasPrefix(l, []byte("internal/")) || bytes.HasPrefix(l, []byte("golang.org/x/sync/errgroup.")) {
				continue
			}
			if !bytes.HasPrefix(l, []byte(enginePkg)) && !bytes.HasPrefix(l, []byte(budgetPkg)) {
				return false
			}
			break
		}
	}
	return engines > 0
}
