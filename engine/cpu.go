package engine

import "context"

// cpuPool is resources.workers as one budget for the workers of every
// parallel stage, as tf.data's shared thread pool is: a worker holds a
// slot while it computes, so at most that many compute at once, whatever
// the stages' parallelism adds up to. A stage's parallelism is how many
// of the slots it may use at once. Stages that run on one goroutine
// (sources, shuffle, batch, sinks) take none, as tf.data's sequential
// ones run outside its pool.
type cpuPool chan struct{}

// newCPUPool makes a pool of workers slots (at least one).
func newCPUPool(workers int) cpuPool { return make(cpuPool, max(1, workers)) }

// cpuSlot is one worker's hold on the pool.
type cpuSlot struct {
	pool cpuPool
	held bool
}

// take waits for a slot, or for ctx to end (then the worker goes on
// without one, to see the cancel and stop).
func (c *cpuSlot) take(ctx context.Context) {
	if c == nil || c.held {
		return
	}
	select {
	case c.pool <- struct{}{}:
		c.held = true
	case <-ctx.Done():
	}
}

// give returns the slot, if held. A worker gives it before it waits for
// memory: the samples that would free it may need a slot to move on, and
// a worker waiting with one could hold up the stage below for ever.
func (c *cpuSlot) give() {
	if c == nil || !c.held {
		return
	}
	<-c.pool
	c.held = false
}
