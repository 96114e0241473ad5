package engine

import (
	"context"

	"golang.org/x/sync/errgroup"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/stages"
)

// prefetchQueue is how many chunks' read-ahead may wait for the prefetch
// goroutine; more is dropped.
const prefetchQueue = 4

// startPrefetch runs a stage's read-ahead (stages.Prefetcher) on a
// goroutine of its own, so that a slow open (a directory not yet cached,
// a network file system) holds up neither the dispatcher nor the stage.
// It returns the hook an inlet calls with each chunk, and stop, which
// ends the goroutine when the stage needs no more, dropping the work still
// queued. Read-ahead that finds the queue full is dropped too: the stage
// then reads those files itself, as without it. A panic in the stage's
// Prefetch or in the work it returned fails the run naming the stage, as
// one in Process does; the hook runs on the dispatcher of a parallel
// stage, which has no recover of its own.
func (r *Run) startPrefetch(ctx context.Context, g *errgroup.Group, n *node, pf stages.Prefetcher) (hook func([]*sample.Sample), stop func()) {
	work := make(chan func(), prefetchQueue)
	quit := make(chan struct{})
	run := func(f func()) {
		defer func() {
			if rec := recover(); rec != nil {
				_ = r.failPanic(n, rec)
			}
		}()
		f()
	}
	g.Go(func() error {
		for {
			select {
			case f := <-work:
				select {
				case <-quit:
					return nil
				default:
					run(f)
				}
			case <-quit:
				return nil
			case <-ctx.Done():
				return nil
			}
		}
	})
	hook = func(ss []*sample.Sample) {
		var f func()
		run(func() { f = pf.Prefetch(ss) })
		if f != nil {
			select {
			case work <- f:
			default:
			}
		}
	}
	return hook, func() { close(quit) }
}
