package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// skipTypes are the stages that keep a sample's ID and do per-sample work
// a downstream cache can stand in for.
var skipTypes = map[string]bool{"map": true, "filter": true, "parse_example": true, "prefetch": true}

// skipChains maps each stage that may skip work for samples a cache
// already holds to that cache stage: the unbroken chain of ID-keeping
// stages right above a cache, each feeding only the next, so no other
// branch ever sees a skipped sample.
func skipChains(p *plan.Plan) map[*spec.Stage]*spec.Stage {
	out := map[*spec.Stage]*spec.Stage{}
	for _, n := range p.Nodes {
		if n.Stage.Type != "cache" || len(n.Stage.Inputs) != 1 || stages.PassesThrough(p.Spec, n.Stage) {
			continue
		}
		for cur := n.Stage.Inputs[0]; skipTypes[cur.Type] && len(cur.Outputs) == 1 && len(cur.Inputs) == 1; cur = cur.Inputs[0] {
			out[cur] = n.Stage
		}
	}
	return out
}

// fillAbove lists the nodes above cache node n whose skips its fill
// loses: every stage above it up to the caches above it, those included,
// whose records stand for the stages above them (which are idle when such
// a cache replays an earlier fill, and whose skips, when it was filled in
// this run, it recorded).
func fillAbove(n *node, byStage map[*spec.Stage]*node) []*node {
	var out []*node
	seen := map[*spec.Stage]bool{}
	var walk func(st *spec.Stage)
	walk = func(st *spec.Stage) {
		for _, in := range st.Inputs {
			if seen[in] {
				continue
			}
			seen[in] = true
			up := byStage[in]
			out = append(out, up)
			if _, ok := up.impl.(stages.Cacher); !ok {
				walk(in)
			}
		}
	}
	walk(n.st)
	return out
}

// fillSkips totals, by stage, what the stages above cache node n skipped
// in the pass that fills it, with the first causes at each, as the
// report has them: the record the cache keeps of the samples it lacks.
// It is called when the pass ends: the sources above wait for it before
// their next epoch, so the counts are the pass's alone.
//
// A resumed fill takes nothing from the runs before it, as adding their
// counts would count skips twice: a sample they skipped was never
// stored, so this run computes it again from the source down and skips
// it again, counted here. Only a failure that comes and goes (a read
// error) can make the two differ: a sample that failed then and not now
// is stored now, rightly not counted; one stored then that fails now in a
// stage above the map/filter chain, which computes it again, is counted
// though the cache holds it.
//
// It returns nil (unknown) when a cache above has no record of its own
// fill.
func fillSkips(n *node) (map[string]int64, map[string][]string) {
	skipped, causes := map[string]int64{}, map[string][]string{}
	for _, up := range n.fillAbove {
		if c, ok := up.impl.(stages.Cacher); ok {
			st := c.Stats()
			if st.SkippedWhenFilled == nil {
				return nil, nil
			}
			for name, k := range st.SkippedWhenFilled {
				skipped[name] += k
			}
			for name, cs := range st.SkipCausesWhenFilled {
				causes[name] = append(causes[name], cs...)
			}
		}
		up.mu.Lock()
		if up.skipped > 0 {
			skipped[up.st.Name] += up.skipped
			causes[up.st.Name] = append(causes[up.st.Name], up.causes()...)
		}
		up.mu.Unlock()
	}
	for name, cs := range causes {
		if len(cs) > maxCauses {
			causes[name] = cs[:maxCauses]
		}
	}
	return skipped, causes
}

// markIdle finds the stages that need not run: those whose every output
// goes to a complete cache or to another idle stage. It also wires each
// cache's end-of-first-pass signal to the sources above it.
func (r *Run) markIdle(byStage map[*spec.Stage]*node) {
	for i := len(r.nodes) - 1; i >= 0; i-- {
		n := r.nodes[i]
		if _, ok := n.impl.(stages.Cacher); ok {
			n.through = stages.PassesThrough(r.plan.Spec, n.st)
			n.fillAbove = fillAbove(n, byStage)
			n.passDone = make(chan struct{})
			if !n.through {
				r.gateSources(n, n.passDone, byStage, map[*spec.Stage]bool{})
			}
		}
		if len(n.st.Outputs) == 0 {
			continue
		}
		idle, cached := true, true
		for _, o := range n.st.Outputs {
			on := byStage[o]
			c, isCache := on.impl.(stages.Cacher)
			isCache = isCache && !on.through // it reads every epoch
			if !on.idle && !(isCache && c.Complete()) {
				idle = false
			}
			if !isCache && !on.cached {
				cached = false
			}
		}
		n.idle, n.cached = idle, cached
	}
	for _, n := range r.nodes {
		if _, ok := n.impl.(stages.Joiner); ok {
			n.fills = n.st.Above(func(s *spec.Stage) bool {
				up := byStage[s]
				c, ok := up.impl.(stages.Cacher)
				return ok && !up.through && !c.Complete()
			}) != nil
		}
	}
}

func (r *Run) gateSources(n *node, done chan struct{}, byStage map[*spec.Stage]*node, seen map[*spec.Stage]bool) {
	for _, in := range n.st.Inputs {
		if seen[in] {
			continue
		}
		seen[in] = true
		up := byStage[in]
		if _, ok := up.impl.(stages.Source); ok {
			up.gates = append(up.gates, done)
		}
		r.gateSources(up, done, byStage, seen)
	}
}

// runCache passes the first epoch through, storing it, then stops reading
// its input (so everything upstream stops) and replays the store for the
// remaining epochs. A cache complete from an earlier run is replayed from
// the first epoch. Samples an interrupted run stored are taken from the
// store, their upstream work skipped (see skipChains).
func (r *Run) runCache(ctx context.Context, n *node, c stages.Cacher) (err error) {
	o := r.newOutlet(ctx, n)
	in := r.newInlet(ctx, n.ins[0], o)
	defer r.end(n, o, &err, in)
	passOver := sync.OnceFunc(func() { close(n.passDone) })
	defer passOver()
	if n.through {
		return r.passThrough(n, o, in)
	}
	epoch := 0
	if !c.Complete() {
		for first := true; first; {
			it, err := in.next()
			if err != nil {
				return err
			}
			switch {
			case it.end:
				// Input ended without a whole epoch: keep what was stored.
				if err := c.Commit(); err != nil {
					return n.fail(nil, err)
				}
				return o.flush()
			case it.eoe:
				if err := c.Commit(); err != nil {
					return n.fail(nil, err)
				}
				if err := c.MarkComplete(fillSkips(n)); err != nil {
					return n.fail(nil, err)
				}
				if err := o.endEpoch(it.epoch); err != nil {
					return err
				}
				epoch, first = it.epoch+1, false
			default:
				n.in.Add(1)
				s := it.s
				// Busy time is the store's: reads and writes, not the waits
				// for input and for room below (bench showed a cache writing
				// 2.4 GB as 0 % busy).
				t0 := r.clock()
				if _, has := c.Stored(s.ID); has {
					stored, ok, err := c.Get(s.ID)
					if err != nil {
						return n.fail(s, err)
					}
					if !ok {
						// The stages above skipped their work for it, so s is
						// not the sample the cache stands in for: never emit it.
						return n.fail(s, fmt.Errorf("store: sample %d is listed but cannot be read; remove the cache's directory to fill it anew", s.ID))
					}
					// s reserved what the stored sample takes (Stands):
					// it moves over, and emit settles the difference.
					hand(r.budget, stored, s)
					stored.Epoch = s.Epoch
					s = stored
				} else if err := c.Put(ctx, s); err != nil {
					return n.fail(s, fmt.Errorf("store: %w", err))
				}
				n.busyFrom(t0, 0)
				if err := o.emit(s); err != nil {
					return err
				}
			}
		}
	}
	in.stop(r.budget)
	passOver()
	for ; r.epochs() < 0 || epoch < r.epochs(); epoch++ {
		// Busy is the store's time between emits, counted as it goes so
		// that bench's look at the trainer's last step finds it.
		last := r.clock()
		emit := o.emit
		if !last.IsZero() {
			emit = func(s *sample.Sample) error {
				n.busyFrom(last, 0)
				err := o.emit(s)
				last = time.Now()
				return err
			}
		}
		err := c.Replay(ctx, epoch, emit)
		n.busyFrom(last, 0)
		if err != nil {
			return n.fail(nil, err)
		}
		if err := o.endEpoch(epoch); err != nil {
			return err
		}
	}
	return o.flush()
}

// passThrough runs a cache that passes every sample on and stores none
// (stages.PassesThrough: an endless run with a take above it); validate
// warns that it does nothing.
func (r *Run) passThrough(n *node, o *outlet, in *inlet) error {
	for {
		it, err := in.next()
		if err != nil {
			return err
		}
		switch {
		case it.end:
			return o.flush()
		case it.eoe:
			if err := o.endEpoch(it.epoch); err != nil {
				return err
			}
		default:
			n.in.Add(1)
			if err := o.emit(it.s); err != nil {
				return err
			}
		}
	}
}
